"""h(x) scaling and categorical supports, against hand-worked values."""

import numpy as np
import pytest
import torch

from mallocgym.agents.muzero.transforms import Support, h, h_inv, h_inv_np, h_np, two_hot, two_hot_np

torch.set_num_threads(1)


@pytest.mark.parametrize("x, expected", [
    (0.0, 0.0),
    (3.0, 1.0 + 0.003),            # sqrt(4) - 1 + 1e-3 * 3
    (-8.0, -(3.0 - 1.0) - 0.008),  # sign(-8) (sqrt(9) - 1) + 1e-3 * -8
    (99.0, 9.0 + 0.099),           # sqrt(100) - 1 + 0.099
])
def test_h_hand_worked(x, expected):
    assert h_np(x) == pytest.approx(expected, abs=1e-12)
    assert float(h(torch.tensor(x, dtype=torch.float64))) == pytest.approx(expected, abs=1e-12)
    assert h_inv_np(expected) == pytest.approx(x, abs=1e-9)


def test_h_round_trip_both_ways():
    x = np.concatenate([-np.logspace(-6, 5, 200), [0.0], np.logspace(-6, 5, 200)])
    np.testing.assert_allclose(h_inv_np(h_np(x)), x, rtol=1e-9, atol=1e-9)
    y = np.linspace(-300, 300, 1001)
    np.testing.assert_allclose(h_np(h_inv_np(y)), y, rtol=1e-9, atol=1e-9)
    t = torch.as_tensor(x)
    torch.testing.assert_close(h_inv(h(t)), t, rtol=1e-9, atol=1e-9)


def test_h_is_increasing_and_odd():
    x = np.linspace(-50, 50, 2001)
    assert np.all(np.diff(h_np(x)) > 0)
    np.testing.assert_allclose(h_np(-x), -h_np(x))


def test_two_hot_hand_worked():
    np.testing.assert_allclose(two_hot_np(2.5, 0, 5), [0, 0, 0.5, 0.5, 0, 0])
    np.testing.assert_allclose(two_hot_np(-0.25, -2, 2), [0, 0.25, 0.75, 0, 0])
    np.testing.assert_allclose(two_hot_np(3.0, 0, 5), [0, 0, 0, 1, 0, 0])
    np.testing.assert_allclose(two_hot_np(5.0, 0, 5), [0, 0, 0, 0, 0, 1])   # top atom, no overflow
    np.testing.assert_allclose(two_hot_np(7.0, 0, 5), [0, 0, 0, 0, 0, 1])   # clipped
    np.testing.assert_allclose(two_hot_np(-1.0, 0, 5), [1, 0, 0, 0, 0, 0])  # clipped


def test_two_hot_keeps_the_mean_batched():
    y = torch.tensor([[0.1, 1.7], [-2.9, 4.0]], dtype=torch.float64)
    p = two_hot(y, -3, 4)
    assert p.shape == (2, 2, 8)
    atoms = torch.arange(-3, 5, dtype=torch.float64)
    torch.testing.assert_close(p.sum(-1), torch.ones(2, 2, dtype=torch.float64))
    torch.testing.assert_close((p * atoms).sum(-1), y)


def test_support_encode_decode_round_trip():
    s = Support(10)
    assert s.n == 21
    assert s.max_scalar == pytest.approx(h_inv_np(10.0))
    x = torch.tensor([0.0, 0.37, 3.0, 25.0, 99.0, -4.5, -60.0])
    target = s.encode(x)
    assert target.shape == (7, 21)
    torch.testing.assert_close(s.decode(torch.log(target)).float(), x, rtol=1e-5, atol=1e-4)
    # h(3) = 1.003 lies between atoms 1 and 2 (indices 11 and 12): weights 0.997 / 0.003
    torch.testing.assert_close(target[2, 11:13], torch.tensor([0.997, 0.003]), rtol=1e-5, atol=1e-6)


def test_support_clips_beyond_its_range():
    s = Support(2)   # h^-1(2) = 8.0-ish
    big = s.decode(torch.log(s.encode(torch.tensor([1000.0]))))
    assert float(big) == pytest.approx(s.max_scalar, rel=1e-6)


def test_support_rejects_bad_size():
    with pytest.raises(ValueError, match="support size"):
        Support(0)
