"""DLPack exports that numpy's and torch's importers would crash on or
misread, and buffers that give no strides: each refused with a TypeError
(outputs untouched) or read right, never a crash. The capsules are built
by hand with ctypes (DLPack 0.6's DLManagedTensor)."""

import ctypes

import numpy as np
import pytest

import moegrad


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class Capsule:
    """A "dltensor" capsule over `array`'s memory (float32), with fields
    overridden; it keeps what the capsule points to alive."""

    def __init__(self, array, ndim=None, shape=None, strides=None, byte_offset=0, data=None, null_shape=False):
        shape = list(array.shape) if shape is None else shape
        self.shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        self.managed = _DLManagedTensor()
        m = self.managed
        m.data = array.ctypes.data if data is None else data
        m.device_type, m.ndim = 1, len(shape) if ndim is None else ndim
        m.code, m.bits, m.lanes = 2, 32, 1
        m.shape = None if null_shape else ctypes.addressof(self.shape)
        m.strides = None if self.strides is None else ctypes.addressof(self.strides)
        m.byte_offset = byte_offset
        self.capsule = _capsule_new(ctypes.addressof(m), b"dltensor", None)


def problem():
    gy = np.array([[1, 2], [3, 4]], np.float32)
    w = np.arange(6, dtype=np.float32).reshape(1, 3, 2)
    return gy, w, np.array([0, 1], np.int64), np.array([2], np.int64)


def expected():
    gy, w, _, _ = problem()
    return (gy.astype(np.float64) @ w[0].T.astype(np.float64)).astype(np.float32)


class Exporter:
    """An object exporting only __dlpack__."""

    def __init__(self, make):
        self.make = make

    def __dlpack__(self, stream=None):
        return self.make()

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("case", ["negative stride from numpy", "byte_offset", "ndim -1", "ndim 2^30",
                                  "no shape", "a negative dimension", "2^40 x 2^40 elements", "NULL data",
                                  "strides of 2^62"])
def test_a_malformed_capsule_is_refused_as_a_type_error(case):
    gy, w, idx, gl = problem()
    keep = None
    if case == "negative stride from numpy":
        capsule = gy[::-1].__dlpack__()
    else:
        keep = Capsule(gy, **{
            "byte_offset": dict(byte_offset=16, data=gy.ctypes.data - 16),
            "ndim -1": dict(ndim=-1),
            "ndim 2^30": dict(ndim=1 << 30),
            "no shape": dict(null_shape=True),
            "a negative dimension": dict(shape=[2, -2]),
            "2^40 x 2^40 elements": dict(shape=[1 << 40, 1 << 40]),
            "NULL data": dict(data=0),
            "strides of 2^62": dict(strides=[1 << 62, 1]),
        }[case])
        capsule = keep.capsule
    out = np.full((2, 3), 7.0, np.float32)
    with pytest.raises(TypeError, match="grad_y: cannot import this DLPack capsule"):
        moegrad.grad_x(capsule, w, idx, gl, 2, 1, out=out)
    assert (out == 7.0).all()


def test_an_exporters_malformed_capsule_is_refused_as_a_type_error():
    gy, w, idx, gl = problem()
    kept = []

    def null_data():
        kept.append(Capsule(gy, data=0))
        return kept[-1].capsule

    def raising():
        raise KeyError("no")

    with pytest.raises(TypeError, match="grad_y: cannot import this DLPack capsule: its data pointer is NULL"):
        moegrad.grad_x(Exporter(null_data), w, idx, gl, 2, 1)
    with pytest.raises(TypeError, match=r"grad_y: its __dlpack__\(\) failed: KeyError"):
        moegrad.grad_x(Exporter(raising), w, idx, gl, 2, 1)


def test_a_well_formed_capsule_and_export_are_read_right():
    gy, w, idx, gl = problem()
    plain = Capsule(gy)
    assert np.array_equal(np.asarray(moegrad.grad_x(plain.capsule, w, idx, gl, 2, 1)), expected())
    kept = []

    def export():
        kept.append(Capsule(gy))
        return kept[-1].capsule

    assert np.array_equal(moegrad.grad_x(Exporter(export), w, idx, gl, 2, 1), expected())


def test_a_buffer_without_strides_is_read_in_c_order():
    """ctypes arrays export no strides (C order), even when asked for them."""
    gy, w, idx, gl = problem()
    out = ((ctypes.c_float * 3) * 2)()
    moegrad.grad_x(gy, w, idx, gl, 2, 1, out=out)
    assert np.array_equal(np.ctypeslib.as_array(out), expected())
