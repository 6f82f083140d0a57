"""timm's own VisionTransformer, run in a process of its own: the reference for tests/test_pretrained.py.

    python tests/timm_reference.py '<layout as JSON>' <output.pt>
    python tests/timm_reference.py many '{"name": <layout>, ...}' <output.pt>
    python tests/timm_reference.py rope '[[[rows, cols], head_dim], ...]' <output.pt>

writes {"state_dict", "images", "logits", "version"}: a timm ViT of that layout with random values
in every parameter, two random images and timm's logits for them. The layout is VisionTransformer's
keyword arguments, and two of this file's: "distilled": true builds DeiT's VisionTransformerDistilled,
"mlp_layer": "SwiGLU" or "SwiGLUPacked" names timm's gated MLP class. The second form writes
{"q", "rotated", "sin_cos", "version"}: random queries and timm's RotaryEmbeddingCat (in_pixels=False,
the layout of timm's EVA) applied to them by apply_rot_embed_cat, one per [grid, head_dim] asked for.
"many" writes {name: what the first form writes} in one process (timm's import takes seconds).

Where timm lives: `make test` installs timm and torchvision (requirements-timm.txt) with --no-deps
into .venv/timm, outside the course's environment. PyPI's torchvision is a CUDA build whose
compiled operators do not load beside the course's CPU torch ("operator torchvision::nms does not
exist" at import, which would also break transformers' imports in the lessons' kernels). timm's
ViTs use none of those operators, so this file's shim, the only one, skips the module that
registers their fake kernels (torchvision._meta_registrations) before `import timm`.
"""

import json
import sys
import types
from pathlib import Path

TIMM_DIR = Path(__file__).resolve().parents[1] / ".venv" / "timm"


def import_timm():
    """timm from TIMM_DIR, with torchvision's fake-kernel registrations skipped."""
    if not (TIMM_DIR / "timm").is_dir():
        raise SystemExit(f"no timm in {TIMM_DIR}: make .venv/.dev installs it (requirements-timm.txt)")
    sys.path.insert(0, str(TIMM_DIR))
    sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
    import timm

    return timm


def rope(cases: list, output: Path) -> None:
    import torch

    timm = import_timm()
    from timm.layers.pos_embed_sincos import RotaryEmbeddingCat, apply_rot_embed_cat

    torch.manual_seed(0)
    results = []
    for grid, head_dim in cases:
        emb = RotaryEmbeddingCat(head_dim, in_pixels=False, feat_shape=list(grid)).get_embed()  # (N, 2d): sin, cos
        q = torch.randn(2, 3, grid[0] * grid[1], head_dim)
        results.append(dict(q=q, rotated=apply_rot_embed_cat(q, emb), sin_cos=emb, version=timm.__version__))
    torch.save(results, output)


def main(layout: dict, output: Path) -> None:
    import torch

    torch.save(reference(layout), output)


def reference(layout: dict) -> dict:
    import torch

    timm = import_timm()
    torch.manual_seed(0)
    kwargs = dict(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, num_classes=5)
    layout = dict(layout)
    if "mlp_layer" in layout:
        layout["mlp_layer"] = getattr(timm.layers, layout["mlp_layer"])
    if layout.pop("distilled", False):
        model = timm.models.deit.VisionTransformerDistilled(**kwargs, **layout).eval()
    else:
        model = timm.models.vision_transformer.VisionTransformer(**kwargs, **layout).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)  # no default init (a zero bias, a unit scale) can hide a mistake
        images = torch.randn(2, 3, 32, 32)
        logits = model(images)
    return dict(state_dict=model.state_dict(), images=images, logits=logits, version=timm.__version__)


if __name__ == "__main__":
    if sys.argv[1] == "rope":
        rope(json.loads(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "many":
        import torch

        torch.save({name: reference(layout) for name, layout in json.loads(sys.argv[2]).items()}, Path(sys.argv[3]))
    else:
        main(json.loads(sys.argv[1]), Path(sys.argv[2]))
