"""How much arithmetic a model does per image: the multiply-adds of one forward pass, counted by
torch's own FlopCounterMode, so that models of the same size can be compared by their cost too."""

import math

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from utils.runtime import eval_mode
from utils.validation import WrongTypeError, check_whole, describe

MAX_INPUT_NUMBERS = 2**24  # numbers in one example: a 2,048 x 2,048 RGB image is 12.6 M


def _fused_attention_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    """FLOPs of torch's fused CPU attention kernel, for which FlopCounterMode has no formula: the
    two matmuls q k^T (B, heads, N_q, d) x (B, heads, d, N_k) and weights v, 2 FLOPs per multiply-add."""
    B, heads, N_q, d = query_shape
    N_k, d_v = key_shape[-2], value_shape[-1]
    return 2 * B * heads * N_q * N_k * (d + d_v)


def _uncounted_formulas() -> dict:
    """Formulas for the ops that FlopCounterMode leaves out: the fused attention kernel on the CPU."""
    kernel = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    return {kernel: _fused_attention_flops} if kernel is not None else {}


def check_module(model, example: str) -> nn.Module:
    """`model` if it is a torch nn.Module; else a WrongTypeError naming what came (a class that
    was not built yet gets a hint). `example`: what to pass, e.g. "VisionTransformer(config)"."""
    if isinstance(model, nn.Module):
        return model
    hint = ""
    if isinstance(model, type) and issubclass(model, nn.Module):
        hint = f": that is the class {model.__name__}; build a model from it first"
    raise WrongTypeError(f"model must be a torch nn.Module, e.g. {example}, got {describe(model)}{hint}")


def _check_input_shape(input_shape) -> tuple[int, ...]:
    """`input_shape` as a tuple of whole numbers >= 1 that makes an input small enough to build."""
    expected = "input_shape must be the shape of one example without the batch axis, e.g. (3, 32, 32) for an image"
    if isinstance(input_shape, torch.Tensor):
        raise WrongTypeError(
            f"{expected}, got {describe(input_shape)}: pass a shape, not the images (images.shape[1:] for a batch)"
        )
    if not isinstance(input_shape, tuple | list | torch.Size):
        raise WrongTypeError(f"{expected}, got {describe(input_shape)}")
    if len(input_shape) == 0:
        raise ValueError(f"{expected}, got an empty shape {tuple(input_shape)}")
    shape = tuple(check_whole(size, f"input_shape[{i}]") for i, size in enumerate(input_shape))
    if math.prod(shape) > MAX_INPUT_NUMBERS:
        raise ValueError(
            f"input_shape {shape} holds {math.prod(shape):,} numbers per example, more than the "
            f"{MAX_INPUT_NUMBERS:,} this count builds; check it for a typo"
        )
    return shape


def multiply_adds(model: nn.Module, input_shape) -> int:
    """Multiply-adds of `model`'s forward pass on one example (a batch of one), in eval mode and
    without gradients: what torch's FlopCounterMode counts (matmuls, linear layers, convolutions,
    attention, fused or not) divided by two. Norms, activations, softmax and additions are not
    counted; they are a small share of any of the course's models.

    Args:
        model: any nn.Module; its mode (train or eval) is restored afterwards.
        input_shape: one example's shape without the batch axis: (C, H, W) for an image,
            (N, D) for tokens.
    Returns:
        the number of multiply-adds, an int.
    """
    check_module(model, "VisionTransformer(config)")
    shape = _check_input_shape(input_shape)
    weight = next(model.parameters(), None)
    if weight is None:
        weight = next(model.buffers(), None)
    device, dtype = (weight.device, weight.dtype) if weight is not None else (torch.device("cpu"), torch.float32)
    if not dtype.is_floating_point:
        dtype = torch.float32
    example = torch.full((1, *shape), 0.5, device=device, dtype=dtype)  # (1, *input_shape), mid-grey; no RNG used
    counter = FlopCounterMode(display=False, custom_mapping=_uncounted_formulas())
    with eval_mode(model), torch.no_grad():
        try:
            with counter:
                model(example)
        except (ValueError, TypeError, RuntimeError, IndexError) as error:
            hint = ""
            if len(shape) > 1 and shape[0] == 1:
                hint = f" (input_shape is one example's shape, without the batch axis: {shape[1:]}?)"
            raise ValueError(
                f"the model refused an input of shape {(1, *shape)} (a batch of one, from input_shape={shape})"
                f"{hint}: {error}"
            ) from error
    return counter.get_total_flops() // 2
