"""Every ViT of timm's registry (its vision_transformer and deit modules, timm 1.0.31) either loads
into the course's ViT and computes what timm computes (logits within 1e-5), or is refused with a
message naming the feature the course's ViT does not compute: never loaded silently wrong, never a
crash. tests/timm_registry.py walks them in a process of its own (timm lives in .venv/timm).

`make test` walks one model per distinct architecture (utils/timm_vit_settings.json's
representatives: models that differ only in width, depth, heads, patch or image size share one);
`make test-peers` (VIT_TEST_PEERS=1) walks all of them.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from utils.pretrained import from_timm
from utils.timm_models import TIMM_SETTINGS_FILE, TimmRefusal, named_timm_settings
from utils.vit import VisionTransformer, ViTConfig

WALKER = Path(__file__).with_name("timm_registry.py")
TABLE = json.loads(TIMM_SETTINGS_FILE.read_text())
REFUSAL = "the course's ViT does not compute "


def walk(arguments: list[str], output: Path) -> list[dict]:
    done = subprocess.run([sys.executable, WALKER, output, *arguments], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(output.read_text())
    assert result["timm"] == TABLE["timm"] == "1.0.31"
    return result["records"]


def assert_equal_or_refused_by_name(records: list[dict]) -> dict[str, int]:
    counts = {status: sum(r["status"] == status for r in records) for status in ("equal", "refused", "silent", "crash")}
    wrong = [(r["model"], r["status"], r.get("difference"), r.get("reason", "")[-300:]) for r in records
             if r["status"] in ("silent", "crash")]  # fmt: skip
    assert not wrong, wrong
    unnamed = [(r["model"], r["reason"]) for r in records if r["status"] == "refused" and REFUSAL not in r["reason"]]
    assert not unnamed, unnamed
    for record in records:  # the table agrees with what timm's model says today
        assert ("refused" in TABLE["models"][record["model"]]) == (record["status"] == "refused"), record["model"]
    return counts


# make test leaves out the giant-width representatives (30-40 s each on 2 cores, the rest take
# seconds): make test-peers walks them with every other model
GIANT = "vit_giant_"


@pytest.mark.timm
def test_one_model_per_architecture_loads_equal_or_is_refused_by_name(tmp_path):
    names = [name for name in TABLE["representatives"] if not name.startswith(GIANT)]
    assert 25 <= len(names) < len(TABLE["representatives"])
    records = walk(["--models", ",".join(names)], tmp_path / "walk.json")
    assert [r["model"] for r in records] == names
    counts = assert_equal_or_refused_by_name(records)
    assert counts["equal"] >= 10, counts


@pytest.mark.timm
@pytest.mark.peers
def test_every_model_of_timms_registry_loads_equal_or_is_refused_by_name(tmp_path):
    records = walk(["--all"], tmp_path / "walk.json")
    assert sorted(r["model"] for r in records) == sorted(TABLE["models"])
    counts = assert_equal_or_refused_by_name(records)
    assert counts["equal"] >= 90, counts
    print(counts, f"{sum(r['seconds'] for r in records):.0f} s")


def test_the_table_holds_every_model_with_settings_or_a_named_refusal():
    assert len(TABLE["models"]) == 179
    assert set(TABLE["representatives"]) <= set(TABLE["models"])
    for name, entry in TABLE["models"].items():
        assert ("settings" in entry) != ("refused" in entry), name
        if "refused" in entry:
            assert entry["refused"].startswith(REFUSAL), name
    loads = sum("settings" in entry for entry in TABLE["models"].values())
    assert loads >= 90, loads


@pytest.mark.parametrize(
    "name, feature",
    [
        ("vit_base_patch16_siglip_224.webli", "attention pooling"),
        ("vit_base_patch16_rpn_224", "residual post-norm"),
        ("vit_so400m_patch14_siglip_gap_384", "no multiple of the patch size 14"),
    ],
)
def test_from_timm_by_name_refuses_by_name_without_timm(name, feature):
    with pytest.raises(TimmRefusal, match=feature):
        from_timm(name, {})


def test_from_timm_by_name_reads_what_the_state_dict_cannot_show():
    settings = named_timm_settings("vit_base_patch16_clip_quickgelu_224.openai")
    assert (settings["act"], settings["norm_eps"], settings["norm_pre"]) == ("quick_gelu", 1e-5, True)
    deit = named_timm_settings("deit_tiny_distilled_patch16_224")
    config = ViTConfig(embed_dim=192, depth=1, num_heads=3, dist_token=True, num_classes=7)
    state = VisionTransformer(config).state_dict()
    model = from_timm("deit_tiny_distilled_patch16_224", state)
    assert model.config == config and deit["dist_token"]
    images = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        reference = VisionTransformer(config).eval()
        reference.load_state_dict(state)
        assert torch.equal(model(images), reference(images))
    with pytest.raises(ValueError, match="no model of timm 1.0.31's vision_transformer or deit modules"):
        from_timm("resnet50", state)
