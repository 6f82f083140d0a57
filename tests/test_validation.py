"""The argument checks every module shares: each names the argument, what it expected and what came."""

import math

import numpy as np
import pytest
import torch

from utils.validation import (
    WrongTypeError,
    check_device,
    check_dtype,
    check_flag,
    check_number,
    check_positive,
    check_probability,
    check_tensor,
    check_whole,
    describe,
)


def test_wrong_type_error_is_both_a_type_error_and_a_value_error():
    assert issubclass(WrongTypeError, TypeError) and issubclass(WrongTypeError, ValueError)


# ---- numbers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, options, error, match",
    [
        (0, dict(whole=True, low=1), ValueError, r"^n must be a whole number, at least 1, got 0$"),
        (
            2.0,
            dict(whole=True, low=1),
            WrongTypeError,
            r"^n must be a whole number, at least 1, got 2.0 \(float\): use n=2$",
        ),
        (2.5, dict(whole=True), WrongTypeError, r"^n must be a whole number, got 2.5 \(float\)$"),
        (math.nan, dict(whole=True), WrongTypeError, r"^n must be a whole number, got nan \(float\)$"),
        (True, dict(whole=True, low=0), WrongTypeError, r"got True \(bool\)"),
        (torch.tensor(True), dict(whole=True), WrongTypeError, r"got a tensor of dtype bool and shape \(\)"),
        (
            torch.tensor(3.0),
            dict(whole=True),
            WrongTypeError,
            r"got a tensor of dtype float32 and shape \(\): use int\(x.item",
        ),
        (False, dict(low=0), WrongTypeError, r"^n must be a finite number, at least 0, got False \(bool\)$"),
        ("3", dict(low=0), WrongTypeError, r"got '3' \(str\)"),
        (None, dict(low=0), WrongTypeError, r"got None \(NoneType\)"),
        (
            torch.tensor(3.0),
            dict(low=0),
            WrongTypeError,
            r"got a tensor of dtype float32 and shape \(\): use .item\(\)",
        ),
        (math.nan, dict(low=0), ValueError, r"^n must be a finite number, at least 0, got nan$"),
        (math.inf, dict(low=0), ValueError, r"^n must be a finite number, at least 0, got inf$"),
        (10**400, dict(low=0), ValueError, r"^n must be a finite number, at least 0, got 1000"),  # beyond any float
        (math.nan, dict(), ValueError, r"^n must be a finite number, got nan$"),
        (1.0, dict(low=0, high=1, high_open=True), ValueError, r"from 0 up to \(not including\) 1, got 1.0"),
        (0.0, dict(low=0, high=1, low_open=True), ValueError, r"greater than 0 and at most 1, got 0.0"),
        (1, dict(low=0, high=1, low_open=True, high_open=True), ValueError, r"between 0 and 1 \(neither included\)"),
        (5, dict(high=4), ValueError, r"^n must be a number, at most 4, got 5$"),
        (5, dict(whole=True, low=1, high=4, meaning=" of pixels"), ValueError, r"whole number of pixels, from 1 to 4"),
        (torch.tensor(0), dict(whole=True, low=1), ValueError, r"at least 1, got 0$"),
    ],
)
def test_check_number_names_what_it_wanted_and_what_came(value, options, error, match):
    with pytest.raises(error, match=match):
        check_number(value, "n", **options)


def test_check_number_returns_a_python_number_of_any_kind_in_range():
    for value in (1, np.int64(3), 0.5, np.float32(0.5)):
        assert type(check_number(value, "n", low=0)) is float
    assert check_number(3, "n", whole=True, low=1, high=3) == 3
    for value in (10**400, np.int64(3), torch.tensor(3), torch.tensor([3])):
        assert type(check_number(value, "n", whole=True)) is int


def test_a_long_value_is_cut_in_the_message():
    with pytest.raises(ValueError) as error:
        check_number(10**400, "n", low=0)
    assert len(str(error.value)) < 120 and str(error.value).endswith(" ...")


@pytest.mark.parametrize(
    "check, value, match",
    [
        (check_whole, 0, r"^patch_size must be a whole number, at least 1, got 0$"),
        (check_whole, 4.0, r"^patch_size must be a whole number, at least 1, got 4.0 \(float\): use patch_size=4$"),
        (check_whole, "4", r"^patch_size must be a whole number, at least 1, got '4' \(str\)$"),
        (check_positive, 0, r"^patch_size must be a finite number, greater than 0, got 0$"),
        (check_positive, math.inf, r"^patch_size must be a finite number, greater than 0, got inf$"),
        (check_positive, -1e-9, r"greater than 0, got -1e-09$"),
        (check_probability, 1.0, r"^patch_size must be a number, from 0 up to \(not including\) 1, got 1.0$"),
        (check_probability, math.nan, r"from 0 up to \(not including\) 1, got nan$"),
        (
            check_probability,
            "0.1",
            r"^patch_size must be a number, from 0 up to \(not including\) 1, got '0.1' \(str\)$",
        ),
    ],
)
def test_the_shortcuts_name_the_argument_and_the_range(check, value, match):
    with pytest.raises(ValueError, match=match):
        check(value, "patch_size")


def test_the_shortcuts_return_python_numbers():
    assert check_whole(np.int64(4), "n") == 4 and type(check_whole(np.int64(4), "n")) is int
    assert check_whole(0, "n", minimum=0) == 0
    assert check_whole(2**64 - 1, "seed", minimum=0, maximum=2**64 - 1) == 2**64 - 1
    assert check_positive(2, "n") == 2.0 and type(check_positive(2, "n")) is float
    assert check_probability(0, "p") == 0.0


# ---- flags, tensors, dtypes, devices ---------------------------------------------------------------


@pytest.mark.parametrize(
    "value, match",
    [
        ("no", r"^flag must be True or False, got 'no' \(str\)$"),
        (1, r"^flag must be True or False, got 1 \(int\)$"),
        (None, r"got None \(NoneType\)"),
        (torch.tensor(True), r"got a tensor of dtype bool and shape \(\): use .item\(\)"),
    ],
)
def test_check_flag_refuses_what_is_not_a_bool(value, match):
    with pytest.raises(WrongTypeError, match=match):
        check_flag(value, "flag")
    assert check_flag(False, "flag") is False


def test_no_message_prints_a_tensor_or_an_array():
    big = torch.rand(1000, 1000)
    for call in (
        lambda: check_flag(big, "flag"),
        lambda: check_number(big, "n"),
        lambda: check_whole(big, "n"),
        lambda: check_flag(big.numpy(), "flag"),
    ):
        with pytest.raises(WrongTypeError) as error:
            call()
        assert "shape (1000, 1000)" in str(error.value) and len(str(error.value)) < 200


def test_check_flag_takes_a_numpy_bool_as_a_bool():
    assert check_flag(np.bool_(True), "flag") is True


def test_describe_names_a_tensor_by_dtype_and_shape():
    assert describe(torch.zeros(2, 3, dtype=torch.float64)) == "a tensor of dtype float64 and shape (2, 3)"
    assert describe(np.zeros((4,), dtype=np.uint8)) == "a NumPy array of dtype uint8 and shape (4,)"
    assert describe("88") == "'88' (str)"
    assert describe("x" * 500).endswith("... (str)") and len(describe("x" * 500)) < 80
    assert describe(-(10**5000)) == "an int of about 5000 digits (int)"


def test_a_value_whose_repr_fails_is_still_refused_with_a_message():
    class Unprintable:
        def __repr__(self):
            raise RuntimeError("no repr")

    with pytest.raises(WrongTypeError, match=r"^n must be a whole number, at least 1, got an unprintable value"):
        check_whole(Unprintable(), "n")


@pytest.mark.parametrize(
    "value, options, error, match",
    [
        (
            [1, 2],
            dict(shape="(B, N)"),
            WrongTypeError,
            r"^expected x as a torch.Tensor shaped \(B, N\), got list: ",
        ),
        (np.zeros(3), dict(), WrongTypeError, r"^expected x as a torch.Tensor, got ndarray: .*torch.from_numpy"),
        (None, dict(), WrongTypeError, r"^expected x as a torch.Tensor, got NoneType$"),
        (torch.zeros(2, 3), dict(shape="(B, N, D)", ndim=3), ValueError, r"x shaped \(B, N, D\), got a 2-D tensor"),
        (torch.zeros(2), dict(ndim=2), ValueError, r"^expected x, got a 1-D tensor of shape \(2,\)$"),
        (torch.zeros(0, 3), dict(ndim=2, nonempty=True), ValueError, r"with something on every axis, got an empty"),
    ],
)
def test_check_tensor_names_what_it_wanted_and_what_came(value, options, error, match):
    with pytest.raises(error, match=match):
        check_tensor(value, "x", **options)


def test_check_tensor_returns_the_tensor_itself():
    x = torch.zeros(0, 3)
    assert check_tensor(x, "x", ndim=2) is x  # empty passes unless nonempty=True


def test_check_dtype_asks_for_floats_of_the_weights_dtype():
    check_dtype(torch.zeros(2), "images")
    check_dtype(torch.zeros(2), "images", torch.float32)
    with pytest.raises(ValueError, match=r"got torch.uint8; convert with `images.float\(\)` \(and divide by 255"):
        check_dtype(torch.zeros(2, dtype=torch.uint8), "images", torch.float32)
    with pytest.raises(ValueError, match=r"float32 \(the dtype of the model's weights\), got torch.float64"):
        check_dtype(torch.zeros(2, dtype=torch.float64), "images", torch.float32)
    with pytest.raises(WrongTypeError, match=r"expected images as a torch.Tensor, got list"):
        check_dtype([0.0], "images")


def test_check_device_asks_for_the_weights_device():
    weight = torch.zeros(2)
    check_device(torch.zeros(2), "images", weight)
    with pytest.raises(ValueError, match=r"images are on meta but the model is on cpu; .*images.to\('cpu'\)"):
        check_device(torch.zeros(2, device="meta"), "images", weight)
    with pytest.raises(WrongTypeError, match=r"expected images as a torch.Tensor, got str"):
        check_device("images", "images", weight)
