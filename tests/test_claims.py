"""utils/claims.py: lesson 9's trials, defined once, their measurements, and the results `make
claims` shipped for them (utils/results/lesson9.json): complete, made by today's recipes, and
reproduced by a rerun."""

import json
import math
from pathlib import Path

import pytest
import torch

from utils.ablations import SEEDS, Experiment, agreement, experiment_data, made_here, shipped_results
from utils.claims import (
    CLAIMS,
    CORE,
    RESULTS_FILE,
    TRIALS,
    Trial,
    after_epoch,
    agrees_with_shipped,
    attention_logits,
    grade_claim,
    max_attention_logits,
    mirror_advantage,
    mirror_pairs,
    nearest_is_neighbour,
    position_structure,
    run_arm,
    run_trial,
    shipped_runs,
    shipped_values,
    sincos_matched,
    verdict_table,
)
from utils.embeddings import gaussian_pos_embed, grid_distance, pos_embed_similarity, sincos_pos_embed_2d
from utils.rubric import INCONCLUSIVE, NOT_TESTABLE, REFUTED, SUPPORTED, holm
from utils.runtime import set_seed


def test_every_trial_ships_five_seeds_made_by_todays_recipe():
    shipped = shipped_results(RESULTS_FILE)
    assert list(shipped["experiments"]) == list(TRIALS)
    assert shipped["threads"] == 1 and shipped["seeds"] == list(SEEDS)
    for name in TRIALS:
        runs = shipped_runs(name)  # raises when the recipe changed since
        assert [run["seed"] for run in runs] == list(SEEDS)
        assert all(run["finite"] for run in runs) or "lr 0.1" in name, name
        assert all(run["steps"] == TRIALS[name].experiment.fit["steps"] for run in runs)


@pytest.mark.reproduction
@pytest.mark.parametrize("name", ["digits", "digits, class token xavier"])
def test_a_rerun_reproduces_the_shipped_seed_0(name):
    """Two of lesson 9's cheapest trials (digits, 600 steps, a few seconds each; stable ones, not the
    lr 0.1 runs, whose outcome swings with the last bits), rerun as the lesson runs them: the shipped
    numbers again, bit for bit on the kind of CPU that made lesson9.json, and where one more seed
    would land on another kind (utils.ablations.Agreement)."""
    data = experiment_data("digits")
    run, runs = run_trial(name, 0, data), shipped_runs(name)
    for key in ("val_accuracy", "test_accuracy"):
        agrees = agrees_with_shipped(name, run, data, key)
        assert agrees and agrees.exact == made_here(RESULTS_FILE, name), str(agrees)
    assert run["steps"] == runs[0]["steps"]
    for parameter, growth in runs[0].get("growth", {}).items():
        seeds = [shipped["growth"][parameter] for shipped in runs]
        agrees = agreement(run["growth"][parameter], growth, seeds, exact=made_here(RESULTS_FILE, name))
        assert agrees, f"{parameter}: {agrees}"


def test_the_inits_are_the_ones_named():
    def cls_token(kind):
        set_seed(0)
        return Trial(TRIALS["digits"].experiment, {"cls_token": kind}).build().cls_token.detach().flatten()

    D = 64
    bound = math.sqrt(6 / (2 * D))  # Xavier-uniform on (1, 1, D): fan_in = fan_out = D
    xavier = cls_token("xavier")
    assert xavier.abs().max() <= bound and xavier.abs().max() > 0.8 * bound
    assert 0 < cls_token("timm").abs().max() < 1e-5
    assert (cls_token("zeros") == 0).all()
    set_seed(0)
    default = TRIALS["digits"].build().cls_token.detach()
    assert 0.01 < default.std() < 0.03  # trunc-normal(0.02)
    set_seed(3)
    model = TRIALS["orientation, gaussian init"].build()
    set_seed(3)
    TRIALS["orientation"].experiment.build()  # the same draws before the table is replaced
    expected = gaussian_pos_embed(model.patch_embed.grid_size, 64, num_prefix_tokens=1)
    torch.testing.assert_close(model.pos_embed.detach(), expected)


def test_a_trial_refuses_what_it_cannot_do():
    vit = Experiment("digits", "vit", {"steps": 10})
    with pytest.raises(ValueError, match="trials train tiny ViTs, got a deep_cnn"):
        Trial(Experiment("digits", "deep_cnn", {"steps": 10}))
    with pytest.raises(ValueError, match="'cls_token' to one of"):
        Trial(vit, {"cls_token": "ones"})
    with pytest.raises(ValueError, match="needs pool='cls'"):
        Trial(Experiment("digits", "vit", {"steps": 10}, {"pool": "mean"}), {"cls_token": "zeros"})
    with pytest.raises(ValueError, match="needs pos_embed='learned'"):
        Trial(Experiment("digits", "vit", {"steps": 10}, {"pos_embed": "sincos"}), {"pos_embed": "gaussian"})
    with pytest.raises(ValueError, match="unknown measures"):
        Trial(vit, measures=("accuracy",))
    with pytest.raises(ValueError, match="did you mean 'digits, patch 2'"):
        run_trial("digits patch 2", 0)


def test_mirror_pairs_and_the_mirror_advantage():
    assert mirror_pairs(2, 3).tolist() == [2, 1, 0, 5, 4, 3]
    grid = (4, 4)
    plain = torch.exp(-grid_distance(*grid))  # similarity that depends on the distance alone
    assert mirror_advantage(plain, grid) == pytest.approx(0.0, abs=1e-7)
    mirrored = plain.clone()
    mirror = mirror_pairs(*grid)
    mirrored[torch.arange(16), mirror] = 1.0  # every mirror pair as similar as a position to itself
    # mirror pairs 1 apart (columns 1, 2) gain 1 - e^-1, those 3 apart (columns 0, 3) 1 - e^-3
    assert 1 - math.exp(-1) < mirror_advantage(mirrored, grid) < 1 - math.exp(-3)


def test_nearest_is_neighbour_sees_a_grid_and_not_noise():
    assert nearest_is_neighbour(pos_embed_similarity(sincos_pos_embed_2d(4, 64), 1), (4, 4)) == 1.0
    torch.manual_seed(0)
    noise = pos_embed_similarity(torch.randn(1, 17, 64), 1)
    assert nearest_is_neighbour(noise, (4, 4)) < 0.6
    structure = position_structure(gaussian_pos_embed(4, 64, generator=torch.Generator().manual_seed(0)), (4, 4), 1)
    assert structure["near"] > structure["far"] and structure["nearest_is_neighbour"] == 1.0


def test_shipped_values_name_what_the_runs_hold():
    assert len(shipped_values("digits")) == len(SEEDS)
    with pytest.raises(ValueError, match="not 'accuracy'"):
        shipped_values("digits", "accuracy")


# ---- refused inputs (review findings S1, S2, S5, obscure 9, 12, 13) -----------------------------


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_the_structure_of_a_table_holding_nan_or_infinity_is_refused(bad):
    """S5: a diverged run's table gave NaNs and a plausible 'nearest is a neighbour' fraction."""
    table = torch.randn(1, 17, 8)
    table[0, 3, 2] = bad
    with pytest.raises(ValueError, match=r"the position table holds NaN or infinity \(a diverged run\?\)"):
        position_structure(table, (4, 4), 1)
    similarity = pos_embed_similarity(torch.randn(1, 17, 8), 1)
    similarity[2, 5] = bad
    for measure in (nearest_is_neighbour, mirror_advantage):
        with pytest.raises(ValueError, match=r"similarity holds NaN or infinity \(a diverged run\?\)"):
            measure(similarity, (4, 4))


def test_after_epoch_wants_a_whole_epoch_the_trial_ran():
    """Obscure 12: epoch 1.5 gave 'list indices must be integers or slices, not float'."""
    assert after_epoch("orientation", "val_loss", 16) == [run["val_loss"][15] for run in shipped_runs("orientation")]
    with pytest.raises(TypeError, match=r"epoch must be a whole number, from 1 to 16, got 1.5 \(float\)"):
        after_epoch("orientation", "val_loss", 1.5)
    for epoch in (0, 17):
        with pytest.raises(ValueError, match=rf"epoch must be a whole number, from 1 to 16, got {epoch}"):
            after_epoch("orientation", "val_loss", epoch)


def test_a_trial_wants_its_measures_as_a_tuple_of_names():
    """Obscure 13: measures='positions' was read letter by letter."""
    experiment = TRIALS["orientation"].experiment
    with pytest.raises(
        TypeError, match=r"measures must be a tuple of names, e.g. \('positions',\), got the string 'positions'"
    ):
        Trial(experiment, measures="positions")
    with pytest.raises(TypeError, match=r"experiment must be an Experiment"):
        Trial("orientation")
    with pytest.raises(TypeError, match=r"init must be a dict"):
        Trial(experiment, init="gaussian")


def test_a_trial_refuses_another_trials_data_and_a_bad_seed_before_training():
    """S1 for lesson 9: 'orientation 1000' and 'orientation' ask the same question of other images;
    obscure 9: a seed set_seed cannot take."""
    quarter = experiment_data("orientation_1000")
    run = dict(shipped_runs("orientation")[0])
    with pytest.raises(ValueError, match=r"'orientation' is measured on experiment_data\('orientation'\), but data is"):
        agrees_with_shipped("orientation", run, quarter)
    with pytest.raises(ValueError, match=r"'orientation' trains on experiment_data\('orientation'\)"):
        run_trial("orientation", 0, quarter)
    with pytest.raises(ValueError, match=r"seed must be a whole number, from 0 to 4294967295, got -1"):
        run_trial("orientation 1000", -1, quarter)
    with pytest.raises(TypeError, match=r"seed must be a whole number, from 0 to 4294967295, got 1.5 \(float\)"):
        run_trial("orientation 1000", 1.5, quarter)
    with pytest.raises(ValueError, match=r"run\['val_accuracy'\] must be a fraction from 0 to 1, got 97.0"):
        agrees_with_shipped("orientation 1000", {"seed": 0, "val_accuracy": 97.0}, quarter)


# ---- issue 32: the magnitude-matched arm, the attention logits, the verdicts ----------------------


def test_sincos_at_learned_scale_keeps_sin_cos_and_takes_the_learned_rows_size():
    set_seed(0)
    learned = TRIALS["orientation"].build().pos_embed.detach()
    set_seed(0)
    model = TRIALS["orientation, sincos at learned scale"].build()
    table = model.pos_embed.detach()
    rows = table[0, 1:].norm(dim=-1)  # (N,)
    torch.testing.assert_close(rows, torch.full_like(rows, float(learned[0, 1:].norm(dim=-1).mean())))
    full = sincos_pos_embed_2d(4, 64)
    cos = torch.nn.functional.cosine_similarity(table[0, 1:], full[0, 1:], dim=-1)
    torch.testing.assert_close(cos, torch.ones_like(cos))  # the same directions: only the size differs
    assert (table[0, 0] == 0).all()  # the class token's row, as in sincos_pos_embed_2d
    torch.testing.assert_close(sincos_matched(model), table)  # the rows' norm is kept: scaling again changes nothing
    assert TRIALS["orientation, sincos at learned scale"].experiment.fit["lr_multipliers"] == {"pos_embed": 0.0}


def test_attention_logits_are_what_the_softmax_turns_into_the_attention():
    set_seed(0)
    model = TRIALS["digits"].build()
    images = experiment_data("digits").val.tensors[0][:8]
    logits = attention_logits(model, images)  # depth x (B, heads, T, T)
    _, attention = model(images, return_attention=True)  # (depth, B, heads, T, T)
    torch.testing.assert_close(torch.stack([block.softmax(dim=-1) for block in logits]), attention)
    assert max_attention_logits(model, images) == [float(block.max()) for block in logits]


def test_run_arm_runs_a_trial_of_your_own_and_refuses_a_name():
    run = run_arm(Trial(Experiment("digits", "vit", {"steps": 3, "lr": 3e-3})), 0)
    assert run["steps"] == 3 and 0 <= run["val_accuracy"] <= 1
    with pytest.raises(TypeError, match=r"trial must be a Trial \(utils.claims\), got 'digits' \(str\)"):
        run_arm("digits", 0)


# The outcome of every claim as lesson 9 states it (its text and its summary table).
EXPECTED = {
    "1": f"mixed: 1 {INCONCLUSIVE}, 2 {REFUTED}",
    "1, x10": f"mixed: 2 {SUPPORTED}, 1 {INCONCLUSIVE}",
    "2": REFUTED,
    "3": f"mixed: 4 {REFUTED}, 2 {SUPPORTED}",
    "3, scale": f"{SUPPORTED} (2 of 2)",
    "4": INCONCLUSIVE,
    "5": f"{INCONCLUSIVE} (2 of 2)",
    "5, NaN": NOT_TESTABLE,
    "6": SUPPORTED,
    "7": INCONCLUSIVE,
    "8": f"{REFUTED} (6 of 6)",
    "9": INCONCLUSIVE,
    "10": f"mixed: 3 {REFUTED}, 1 {SUPPORTED}",
    "11": f"{REFUTED} (3 of 3)",
    "12": SUPPORTED,
    "13": SUPPORTED,
}
NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "09_claims.ipynb"


def _printed(path: Path = NOTEBOOK) -> str:
    """What the lesson shows in text: its printed lines and its displays' text/plain (the tables)."""
    cells = json.loads(path.read_text())["cells"]
    return "".join(
        "".join(output.get("text", "")) + "".join(output.get("data", {}).get("text/plain", "")) + "\n"
        for cell in cells
        if cell["cell_type"] == "code"
        for output in cell.get("outputs", [])
    )


def test_every_printed_verdict_is_rederived_from_the_results_file():
    """Each graded row lesson 9 shows (its stored outputs) comes out of utils/results/lesson9.json
    again, and each claim's outcome is the one the lesson states."""
    from utils.claims import outcome_of

    printed = _printed().splitlines()
    assert list(CLAIMS) == list(EXPECTED)
    for key in CLAIMS:
        assert outcome_of(grade_claim(key)) == EXPECTED[key], key
        for label, verdict in verdict_table(key).rows:
            assert any(line.startswith(label) and line.endswith(verdict) for line in printed), (
                f"claim {key}: {label!r} | {verdict!r} is not what the lesson shows"
            )
    assert set(CORE) <= set(CLAIMS)


def test_the_verdicts_follow_from_holm_over_each_family():
    """The rubric's Holm step, redone by hand for claim 8's six comparisons."""
    from utils.rubric import grade

    grades = grade_claim("8")
    alone = [grade(**g).p_adjusted for g in CLAIMS["8"].family().values()]
    assert [g.p_adjusted for g in grades.values()] == pytest.approx(holm(alone))
    assert all(g.family == 6 for g in grades.values())


def test_run_experiments_drops_only_what_the_suite_no_longer_defines():
    """tools/run_experiments.py --drop: an experiment the suite still defines is refused by name."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    from run_experiments import stored_results

    with pytest.raises(ValueError, match=r"--drop 'digits': --suite claims still defines it"):
        stored_results(RESULTS_FILE, ["orientation"], "claims", drop=["digits"])
    assert list(stored_results(RESULTS_FILE, ["orientation"], "claims", drop=["gone"])["experiments"]) == list(TRIALS)
