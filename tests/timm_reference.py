"""timm's own VisionTransformer, run in a process of its own: the reference for tests/test_pretrained.py.

    python tests/timm_reference.py '<layout as JSON>' <output.pt>

writes {"state_dict", "images", "logits", "version"}: a timm ViT of that layout with random values
in every parameter, two random images and timm's logits for them.

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


def main(layout: dict, output: Path) -> None:
    import torch

    timm = import_timm()
    torch.manual_seed(0)
    kwargs = dict(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, num_classes=5)
    model = timm.models.vision_transformer.VisionTransformer(**kwargs, **layout).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)  # no default init (a zero bias, a unit scale) can hide a mistake
        images = torch.randn(2, 3, 32, 32)
        logits = model(images)
    torch.save(dict(state_dict=model.state_dict(), images=images, logits=logits, version=timm.__version__), output)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]), Path(sys.argv[2]))
