// A DLTensor view of a Python array without copying: numpy arrays (and any
// object with the buffer protocol) through the buffer protocol, PyTorch
// tensors (and any object with __dlpack__) through DLPack. The view owns
// what keeps the memory alive; it must be built with the GIL held and may be
// used without it.
#pragma once

#include <dlpack/dlpack.h>
#include <moegrad/moegrad.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace moegrad::python {

// An array refused before the library sees it (its format, strides, a
// read-only output): raised in Python as moegrad.Error with this status,
// like the library's own refusals.
struct ArrayError : std::runtime_error {
  ArrayError(moegrad_status s, const std::string& message) : std::runtime_error(message), status(s) {}
  moegrad_status status;
};

class TensorRef {
 public:
  // Throws ArrayError (an unsupported format or byte order, a read-only
  // output, an output with torch's negative bit, strides that are not whole
  // elements) or TypeError (not an array).
  TensorRef(pybind11::handle obj, const char* name, bool writable);
  TensorRef(const TensorRef&) = delete;
  TensorRef& operator=(const TensorRef&) = delete;

  const DLTensor* get() const { return &tensor_; }

 private:
  void from_buffer(pybind11::handle obj, const char* name, bool writable);
  void from_dlpack(pybind11::handle obj, const char* name, bool writable);

  DLTensor tensor_{};
  std::vector<int64_t> shape_, strides_;
  // A buffer is released by its deleter, so also when the constructor throws
  // after taking it (no destructor runs then, but members are destroyed).
  struct BufferRelease {
    void operator()(Py_buffer* view) const {
      PyBuffer_Release(view);
      delete view;
    }
  };
  pybind11::object owner_;  // a DLPack capsule
  std::unique_ptr<Py_buffer, BufferRelease> buffer_;
};

// What numpy's and torch's DLPack importers (numpy 1.24, torch 1.13) would
// crash on or misread, refused before a capsule reaches them, as TypeError:
// a capsule already used, not on the CPU, ndim outside [0, 32], no shape,
// a negative dimension, an element type of odd bits or several lanes,
// sizes or strides past 63 bits, NULL data with elements; for torch also a
// negative stride or a byte_offset, which it would not apply. Leaves the
// capsule unconsumed. Returns its dtype's (code, bits).
std::pair<int, int> check_importable_capsule(pybind11::handle capsule, const char* name, bool for_torch);

}  // namespace moegrad::python
