#include "tensor_ref.h"

#include <cstring>
#include <string>

namespace py = pybind11;

namespace moegrad::python {
namespace {

[[noreturn]] void refuse(moegrad_status status, const std::string& message) { throw ArrayError(status, message); }

// kDLBool of DLPack 0.8; Debian's DLPack 0.6 has no name for it.
constexpr uint8_t kDLBoolCode = 6;

// A tensor of a torch vmap (functorch's, or the one behind
// jacobian(vectorize=True) and autograd.grad(is_grads_batched=True), which
// reaches the layer's backward as grad_y) wraps a batch of tensors and has
// no storage to export; the legacy kind cannot even be detached. Told by
// its dispatch keys (FuncTorchBatched, Batched); false where this torch has
// no way to tell.
bool is_vmap_tensor(py::handle obj) {
  try {
    const py::dict modules = py::module_::import("sys").attr("modules");
    if (!modules.contains("torch")) return false;
    const py::object torch = modules["torch"];
    if (!py::isinstance(obj, torch.attr("Tensor"))) return false;
    const py::object c = torch.attr("_C");
    if (!py::hasattr(c, "_dispatch_keys")) return false;
    return std::string(py::str(c.attr("_dispatch_keys")(obj))).find("Batched") != std::string::npos;
  } catch (py::error_already_set&) {
    return false;
  }
}

// What torch's __dlpack__ cannot export it refuses with a RuntimeError (and
// a vmap's tensor cannot even be detached first), and a tensor on another
// device it exports for the library to refuse by its device number. All are
// refused here, before anything is asked of the tensor, as moegrad.Error
// saying what to do.
void refuse_what_dlpack_cannot_carry(const py::object& tensor, const char* name) {
  if (is_vmap_tensor(tensor))
    refuse(MOEGRAD_STATUS_BAD_LAYOUT, std::string(name) + ": a batched tensor of a torch vmap (functorch.vmap, "
                                      "jacobian(vectorize=True), autograd.grad(is_grads_batched=True)), which has "
                                      "no memory of its own to read; compute per sample instead (e.g. "
                                      "vectorize=False)");
  if (!py::hasattr(tensor, "layout") || !py::hasattr(tensor, "device") || !py::hasattr(tensor, "dtype")) return;
  const std::string layout = py::str(tensor.attr("layout"));
  if (layout != "torch.strided")
    refuse(MOEGRAD_STATUS_BAD_LAYOUT, std::string(name) + ": a " + layout + " tensor; moegrad reads dense "
                                          "(torch.strided) tensors, e.g. from .to_dense()");
  const std::string device = py::str(tensor.attr("device"));
  if (device != "cpu")
    refuse(MOEGRAD_STATUS_UNSUPPORTED_DEVICE, std::string(name) + ": a tensor on " + device +
                                                  "; moegrad computes on the CPU, e.g. with .cpu()");
  if (std::string(py::str(tensor.attr("dtype"))) == "torch.bool")
    refuse(MOEGRAD_STATUS_BAD_DTYPE, std::string(name) + ": dtype bool; moegrad reads float32, float16, "
                                         "bfloat16, int32 and int64");
}

// numpy exports no buffer for datetime64 and timedelta64 (kinds 'M' and
// 'm'); such an array is refused for its dtype, as one whose buffer format
// moegrad does not read is, not for a layout it does not have.
void refuse_what_numpy_cannot_export(py::handle obj, const char* name) {
  try {
    if (!py::hasattr(obj, "dtype")) return;
    const py::object dtype = obj.attr("dtype");
    if (!py::hasattr(dtype, "kind")) return;
    const std::string kind = py::str(dtype.attr("kind"));
    if (kind != "M" && kind != "m") return;
    refuse(MOEGRAD_STATUS_BAD_DTYPE, std::string(name) + ": dtype " + std::string(py::str(dtype)) +
                                         "; moegrad reads float32, float16, bfloat16, int32 and int64");
  } catch (py::error_already_set&) {  // an odd dtype attribute: the caller's layout message stands
  }
}

// A struct-module format character (after an optional byte-order prefix)
// and item size -> DLPack type. Unknown kinds map to an opaque code the
// library rejects with its own message.
bool buffer_dtype(const char* format, py::ssize_t itemsize, DLDataType* out) {
  const char* f = format == nullptr ? "B" : format;
  if (*f == '@' || *f == '=' || *f == '<') ++f;
  if (*f == '>' || *f == '!') return false;  // big-endian: not this machine's order
  if (f[0] == '\0' || f[1] != '\0') return false;
  const auto bits = static_cast<uint8_t>(itemsize * 8);
  switch (*f) {
    case 'e': case 'f': case 'd': *out = {kDLFloat, bits, 1}; return true;
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': *out = {kDLInt, bits, 1}; return true;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': *out = {kDLUInt, bits, 1}; return true;
    case '?': *out = {kDLBoolCode, bits, 1}; return true;  // named "bool" in the library's messages
    default: return false;
  }
}

// What a Python exception says, without the traceback pybind11 appends to
// what().
std::string exception_text(const py::error_already_set& e) {
  return std::string(py::str(e.type().attr("__name__"))) + ": " + std::string(py::str(e.value()));
}

}  // namespace

TensorRef::TensorRef(py::handle obj, const char* name, bool writable) {
  if (PyCapsule_CheckExact(obj.ptr()) || (!PyObject_CheckBuffer(obj.ptr()) && py::hasattr(obj, "__dlpack__"))) {
    from_dlpack(obj, name, writable);
    return;
  }
  if (PyObject_CheckBuffer(obj.ptr())) {
    from_buffer(obj, name, writable);
    return;
  }
  throw py::type_error(std::string(name) + ": expected a numpy array or a torch tensor, got " +
                       std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
}

void TensorRef::from_buffer(py::handle obj, const char* name, bool writable) {
  auto view = std::make_unique<Py_buffer>();
  const int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj.ptr(), view.get(), flags) != 0) {
    PyErr_Clear();
    refuse_what_numpy_cannot_export(obj, name);
    refuse(MOEGRAD_STATUS_BAD_LAYOUT, std::string(name) + (writable ? ": output array is not writable (or not strided)"
                                                                     : ": array does not export a strided buffer"));
  }
  buffer_.reset(view.release());  // released from here on, whatever is thrown below
  const Py_buffer& b = *buffer_;
  if (b.itemsize <= 0 || (b.ndim > 0 && b.shape == nullptr))
    refuse(MOEGRAD_STATUS_BAD_LAYOUT, std::string(name) + ": the buffer gives no element size or no shape");
  DLDataType dtype{};
  if (!buffer_dtype(b.format, b.itemsize, &dtype))
    refuse(MOEGRAD_STATUS_BAD_DTYPE, std::string(name) + ": unsupported element format '" +
                                         (b.format ? b.format : "B") +
                                         "' (moegrad takes float32, float16, int32 and int64 in native byte order)");
  shape_.assign(b.shape, b.shape + b.ndim);
  strides_.resize(static_cast<size_t>(b.ndim));
  // No strides means C order (ctypes arrays give none, whatever is asked).
  py::ssize_t c_order = b.itemsize;
  for (int d = b.ndim - 1; d >= 0; --d) {
    const py::ssize_t stride = b.strides != nullptr ? b.strides[d] : c_order;
    if (b.strides == nullptr) c_order *= b.shape[d];
    if (stride % b.itemsize != 0)
      refuse(MOEGRAD_STATUS_BAD_LAYOUT, std::string(name) + ": stride " + std::to_string(stride) +
                                            " bytes of dimension " + std::to_string(d) + " is not a multiple of the " +
                                            std::to_string(b.itemsize) + "-byte element");
    strides_[static_cast<size_t>(d)] = stride / b.itemsize;
  }
  tensor_.data = b.buf;
  tensor_.device = {kDLCPU, 0};
  tensor_.ndim = b.ndim;
  tensor_.dtype = dtype;
  tensor_.shape = shape_.data();
  tensor_.strides = strides_.data();
  tensor_.byte_offset = 0;
}

void TensorRef::from_dlpack(py::handle obj, const char* name, bool writable) {
  py::object capsule;
  if (PyCapsule_CheckExact(obj.ptr())) {
    capsule = py::reinterpret_borrow<py::object>(obj);
  } else {
    py::object source = py::reinterpret_borrow<py::object>(obj);
    refuse_what_dlpack_cannot_carry(source, name);
    if (py::hasattr(source, "detach")) source = source.attr("detach")();  // torch refuses tensors with grad
    // A torch view with the negative bit (x.conj().imag) holds -value in
    // memory, and __dlpack__ (torch 1.13) exports that memory as it is: an
    // input is negated into a copy, an output cannot be written through it.
    if (py::hasattr(source, "is_neg") && source.attr("is_neg")().cast<bool>()) {
      if (writable)
        refuse(MOEGRAD_STATUS_BAD_LAYOUT, std::string(name) + ": a tensor with the negative bit set (a lazily negated view such as "
                                        "x.conj().imag) cannot be written in place; pass a tensor that owns its "
                                        "values, e.g. one from torch.empty");
      source = source.attr("resolve_neg")();
    }
    try {
      capsule = source.attr("__dlpack__")();
    } catch (py::error_already_set& e) {  // anything else it cannot export
      refuse(MOEGRAD_STATUS_BAD_LAYOUT, std::string(name) + ": cannot be read through DLPack: " + exception_text(e));
    }
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    refuse(MOEGRAD_STATUS_NULL_POINTER, std::string(name) + ": DLPack capsule was already consumed");
  }
  // The capsule keeps ownership (its destructor calls the deleter); we only
  // borrow the description while it lives.
  owner_ = capsule;
  tensor_ = managed->dl_tensor;
}

std::pair<int, int> check_importable_capsule(py::handle capsule, const char* name, bool for_torch) {
  auto refuse_type = [&](const std::string& why) {
    throw py::type_error(std::string(name) + ": cannot import this DLPack capsule: " + why);
  };
  // Valid: named "dltensor" and holding a pointer, which GetPointer then returns.
  if (!PyCapsule_IsValid(capsule.ptr(), "dltensor")) refuse_type("it is not an unused DLPack capsule");
  const auto* managed = static_cast<const DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != kDLCPU) refuse_type("its memory is not the CPU's (device type " +
                                                  std::to_string(t.device.device_type) + ")");
  if (t.ndim < 0 || t.ndim > 32) refuse_type("ndim=" + std::to_string(t.ndim) + " is not in [0, 32]");
  if (t.dtype.lanes != 1 || (t.dtype.bits != 8 && t.dtype.bits != 16 && t.dtype.bits != 32 && t.dtype.bits != 64))
    refuse_type("its element type has " + std::to_string(t.dtype.bits) + " bits and " +
                std::to_string(t.dtype.lanes) + " lanes");
  if (t.ndim > 0 && t.shape == nullptr) refuse_type("it has no shape");
  // The elements and the bytes the strides span must fit 63 bits: numpy's
  // byte strides and torch's storage size would wrap.
  const int64_t item = t.dtype.bits / 8;
  int64_t elements = 1, span = item;
  for (int32_t d = 0; d < t.ndim; ++d) {
    const int64_t dim = t.shape[d];
    if (dim < 0) refuse_type("dimension " + std::to_string(d) + " is " + std::to_string(dim));
    if (__builtin_mul_overflow(elements, dim, &elements)) refuse_type("its element count overflows 64 bits");
    const int64_t stride = t.strides != nullptr ? t.strides[d] : 0;  // none: C order, its span checked below
    if (for_torch && stride < 0)
      refuse_type("a negative stride, which torch cannot import; pass the array itself, not its capsule");
    int64_t reach = 0;  // |(dim - 1) * stride| elements, then bytes
    if (dim > 0 && (__builtin_mul_overflow(dim - 1, stride, &reach) || reach == INT64_MIN ||
                    __builtin_mul_overflow(reach < 0 ? -reach : reach, item, &reach) ||
                    __builtin_add_overflow(span, reach, &span)))
      refuse_type("its strides span more than 2^63 bytes");
  }
  if (t.strides == nullptr && __builtin_mul_overflow(elements, item, &span)) refuse_type("it spans more than 2^63 bytes");
  if (elements > 0 && t.data == nullptr) refuse_type("its data pointer is NULL");
  if (for_torch && t.byte_offset != 0)
    refuse_type("byte_offset=" + std::to_string(t.byte_offset) +
                ", which torch would not apply; pass the array itself, not its capsule");
  return {t.dtype.code, t.dtype.bits};
}

}  // namespace moegrad::python
