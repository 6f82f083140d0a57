"""Lesson 1's exercise checkers: patchify, unpatchify and the attention cost of a patch size."""

from collections.abc import Callable

import torch

from utils.checks.core import CheckFailed, call_learner, compare, summarize
from utils.patches import patchify

PATCHIFY_CASES = [  # (B, C, H, W, P): square and not, RGB and grayscale, one and many patches
    (2, 3, 32, 32, 8),
    (1, 3, 24, 40, 8),
    (3, 1, 12, 12, 4),
    (1, 3, 16, 16, 16),
]


def _patch_variants(images: torch.Tensor, P: int) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible patchify results, each keyed by the sentence that explains it."""
    B, C, H, W = images.shape
    grid = images.reshape(B, C, H // P, P, W // P, P)  # (B, C, rows, P, cols, P)
    N = (H // P) * (W // P)
    return {
        "each patch must be flattened in (C, P, P) order (channels first); yours puts the "
        "channels last, (P, P, C)": grid.permute(0, 2, 4, 3, 5, 1).reshape(B, N, -1),
        "the patches are in column-major order (top to bottom first); they must go left to "
        "right, then top to bottom, like reading text": grid.permute(0, 4, 2, 1, 3, 5).reshape(B, N, -1),
        "the pixels inside each patch are transposed (columns before rows); keep (row, column) "
        "order inside a patch": grid.permute(0, 2, 4, 1, 5, 3).reshape(B, N, -1),
        "you sliced the image with a plain reshape, without moving the patch-grid axes next to "
        "each other first (permute before the last reshape)": images.reshape(B, N, -1),
    }


def check_patchify(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check a learner's patchify(images, patch_size) -> (B, N, C*P*P) on random images."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for B, C, H, W, P in PATCHIFY_CASES:
        images = torch.rand(B, C, H, W, generator=generator)
        expected = patchify(images, P)  # (B, N, C*P*P)
        got = call_learner(fn, images.clone(), P)
        N, CPP = expected.shape[1:]
        shape_hints = {
            (B, CPP, N): "the two last axes are swapped, tokens must be the rows (transpose them)",
            (B, H // P, W // P, CPP): "you kept the patch grid; flatten rows and columns into one token axis N",
        }
        where = f"for images of shape {(B, C, H, W)} and patch size {P}"
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_hints=shape_hints,
                layout="(B, N, C*P*P)",
                mistakes=_patch_variants(images, P),
            )
        )
    print(f"✓ patchify matches the reference on {len(verdicts)} image batches: {summarize(verdicts)}")


def check_unpatchify(fn: Callable[[torch.Tensor, int, tuple[int, int]], torch.Tensor]) -> None:
    """Check a learner's unpatchify(patches, patch_size, (H, W)) -> (B, C, H, W)."""
    generator = torch.Generator().manual_seed(1)
    verdicts = []
    for B, C, H, W, P in PATCHIFY_CASES:
        images = torch.rand(B, C, H, W, generator=generator)
        patches = patchify(images, P)
        got = call_learner(fn, patches.clone(), P, (H, W))
        where = f"for images of shape {(B, C, H, W)} and patch size {P}"

        def transposed(got: torch.Tensor) -> str | None:
            """Names square images that come out with rows and columns swapped."""
            if H == W and torch.equal(got, images.transpose(2, 3)):
                return f"the images come out transposed (rows and columns swapped) {where}"
            return None

        verdicts.append(
            compare(
                got,
                images,
                where,
                shape_hints={(B, H, W, C): "channels ended up last; the images must be (B, C, H, W)"},
                diagnose=transposed,
                advice=": undo patchify's steps in reverse order "
                "(reshape to the grid, permute back, reshape to the image)",
            )
        )
    print(f"✓ unpatchify inverts patchify on {len(verdicts)} image batches: {summarize(verdicts)}")


def check_attention_cost(fn: Callable[[int, int], tuple[int, int]]) -> None:
    """Check a learner's attention_cost(image_size, patch_size) -> (num_tokens, num_pairs),
    for a square image with one class token added to the patch tokens."""
    cases = [(224, 16), (224, 32), (32, 4), (96, 8)]
    for image_size, patch_size in cases:
        got = call_learner(fn, image_size, patch_size, returns=object)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise CheckFailed(f"expected a pair (num_tokens, num_pairs), got {got!r}")
        tokens, pairs = (int(x) for x in got)
        N = (image_size // patch_size) ** 2
        T = N + 1
        where = f"for a {image_size} px image and {patch_size} px patches"
        if tokens == N:
            raise CheckFailed(f"{tokens} tokens {where}: you forgot the class token (T = N + 1)")
        if tokens == image_size // patch_size + 1 or tokens == image_size // patch_size:
            raise CheckFailed(
                f"{tokens} tokens {where}: that is patches along one side; the grid is square, "
                "so N = (image_size // patch_size) ** 2"
            )
        if tokens != T:
            raise CheckFailed(f"expected {T} tokens {where}, got {tokens}")
        if pairs == 2 * T or pairs == T * (T - 1) // 2:
            raise CheckFailed(
                f"{pairs} pairs {where}: every token scores every token, itself included, in both directions: T * T"
            )
        if pairs != T * T:
            raise CheckFailed(f"expected {T * T} query-key pairs {where}, got {pairs}")
    print(f"✓ attention_cost is right on {len(cases)} image and patch sizes")
