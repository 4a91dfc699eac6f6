"""Fixtures shared by the model tests."""
import pytest

from rcurves.data import digits


@pytest.fixture(scope="module")
def data():
    """scikit-learn's 8x8 digits: ``(x_train, y_train, x_test, y_test)`` (1,438 / 359, images in [0, 1])."""
    xtr, ytr = digits("train")
    xte, yte = digits("test")
    return xtr, ytr, xte, yte
