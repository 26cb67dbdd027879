import numpy as np
import pytest
import torch

import moegrad


def pytest_report_header(config):
    return f"moegrad {moegrad.__version__} from {moegrad.__file__}; torch {torch.__version__}; numpy {np.__version__}"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
