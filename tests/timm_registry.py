"""Walk timm's ViT registry against the course's from_timm, in a process of its own (timm lives in
.venv/timm and imports only beside its shim: tests/timm_reference.py says why).

    python tests/timm_registry.py <output.json> [--models a,b,c | --all] [--write-table]

For every model of timm's `vision_transformer` and `deit` modules (or the ones named): timm builds it
with 2 blocks and random weights, every parameter moved off its init (+ normal(0, 0.05): a unit
LayerNorm scale, a zero bias or LayerScale's 1e-5 can hide no mistake), runs one image of its own
size, then from_timm(model) and from_timm(name, state_dict) load it and run the same image. Each
model is "equal" (the logits within 1e-5, relative and absolute, both ways of loading), "refused" (a
TimmRefusal / ValueError naming the feature), "silent" (loaded, computes something else) or "crash"
(any other exception). The output JSON holds one record per model and the seconds it took.

--write-table writes utils/timm_vit_settings.json: each model's settings as timm_settings reads them
(or the refusal), and one representative per distinct architecture (models that differ only in
width, depth, heads, MLP ratio, patch or image size share one: the fewest parameters is taken), the
models `make test` walks.
"""

import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timm_reference import import_timm  # noqa: E402

SIZE_FIELDS = ("image_size", "num_heads", "norm_eps", "layer_scale")  # not the architecture's kind
TOLERANCE = 1e-5


def signature(entry: dict) -> str:
    """What makes two models the same architecture: the refusal, or the settings but their sizes."""
    if "refused" in entry:
        return "refused: " + entry["refused"]
    settings = {k: v for k, v in entry["settings"].items() if k not in SIZE_FIELDS}
    settings["layer_scale"] = entry["settings"].get("layer_scale") is not None
    return json.dumps(settings, sort_keys=True)


def walk_one(timm, name: str) -> tuple[dict, dict]:
    """(record, table entry) of one model."""
    import torch

    from utils.pretrained import from_timm
    from utils.timm_models import TimmRefusal, named_timm_settings, timm_settings

    started = time.perf_counter()
    record = {"model": name}
    try:
        with torch.device("meta"):  # the architecture first, allocating nothing: a refused model is never run
            skeleton = timm.create_model(name, pretrained=False, depth=2)
    except Exception:  # a model whose init needs real numbers: built on the CPU
        skeleton = timm.create_model(name, pretrained=False, depth=2)
    record["parameters"] = sum(p.numel() for p in skeleton.parameters())
    try:
        entry = {"settings": timm_settings(skeleton)}
    except TimmRefusal as refusal:
        entry = {"refused": str(refusal)}
        try:
            from_timm(skeleton)
            record.update(status="crash", reason="timm_settings refused it and from_timm did not")
        except TimmRefusal as again:
            record.update(status="refused", reason=str(again))
        except Exception:
            record.update(status="crash", reason=traceback.format_exc()[-1500:])
        record["seconds"] = round(time.perf_counter() - started, 2)
        return record, entry
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, depth=2).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # off the init: no unit scale or zero bias hides a mistake
    height, width = model.patch_embed.img_size
    images = torch.randn(1, 3, height, width)
    with torch.no_grad():
        expected = model(images)
    try:
        ours = from_timm(model)
        with torch.no_grad():
            got = ours(images)
        difference = (got - expected).abs().max().item()
        close = torch.allclose(got, expected, rtol=TOLERANCE, atol=TOLERANCE)
        record.update(difference=difference, scale=expected.abs().max().item())
        if close and TIMM_TABLE.is_file() and name in json.loads(TIMM_TABLE.read_text())["models"]:
            named_timm_settings(name)  # the table agrees that it loads
            by_name = from_timm(name, model.state_dict())
            with torch.no_grad():
                close = torch.allclose(by_name(images), expected, rtol=TOLERANCE, atol=TOLERANCE)
        record["status"] = "equal" if close else "silent"
    except TimmRefusal as refusal:
        record.update(status="refused", reason=str(refusal))
    except Exception:  # anything else: a crash, reported with its traceback's end
        record.update(status="crash", reason=traceback.format_exc()[-1500:])
    record["seconds"] = round(time.perf_counter() - started, 2)
    return record, entry


TIMM_TABLE = ROOT / "utils" / "timm_vit_settings.json"


def main(argv: list[str]) -> None:
    import torch

    torch.set_num_threads(1)
    timm = import_timm()
    output = Path(argv[0])
    names = timm.list_models(module=["vision_transformer", "deit"])
    if "--models" in argv:
        names = argv[argv.index("--models") + 1].split(",")
    elif "--representatives" in argv:
        names = json.loads(TIMM_TABLE.read_text())["representatives"]
    records, table = [], {}
    for name in names:
        record, entry = walk_one(timm, name)
        records.append(record)
        table[name] = {**entry, "parameters": record["parameters"]}
        print(f"{record['status']:8} {record['seconds']:6.1f}s {name} {record.get('reason', '')[:120]}", flush=True)
    output.write_text(json.dumps({"timm": timm.__version__, "records": records}, indent=1) + "\n")
    if "--write-table" in argv:
        groups: dict[str, list[str]] = {}
        for name, entry in table.items():
            groups.setdefault(signature(entry), []).append(name)
        representatives = sorted(min(group, key=lambda n: table[n]["parameters"]) for group in groups.values())
        models = {name: {k: v for k, v in entry.items() if k != "parameters"} for name, entry in table.items()}
        TIMM_TABLE.write_text(
            json.dumps(
                {"timm": timm.__version__, "representatives": representatives, "models": models},
                indent=1,
                sort_keys=True,
            )
            + "\n"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
