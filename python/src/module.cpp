// _moegrad: the C API of moegrad.h and moegrad_layer.h for Python. Every
// operator takes its outputs preallocated (the Python layer allocates them
// with numpy or torch), runs with the GIL released, and raises moegrad.Error
// (a ValueError) carrying the library's one-line message and status.
#include <moegrad/moegrad.h>
#include <moegrad/moegrad_layer.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "api/context.h"
#include "tensor_ref.h"

namespace py = pybind11;
using moegrad::python::TensorRef;

namespace {

// moegrad.Error; one reference kept for the life of the process.
PyObject* g_error_type = nullptr;

// "MOEGRAD_STATUS_N_MISMATCH" from "MOEGRAD_STATUS_N_MISMATCH: ...".
std::string status_name(moegrad_status s) {
  const std::string text = moegrad_status_string(s);
  return text.substr(0, text.find(':'));
}

// Sets moegrad.Error(text) with status s as the pending Python exception.
void set_error(moegrad_status s, const std::string& text) {
  // A message may quote raw bytes (an environment variable's value), so they
  // are decoded leniently: a strict decode would raise UnicodeDecodeError
  // instead of moegrad.Error.
  const py::object message = py::reinterpret_steal<py::object>(
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace"));
  if (!message) throw py::error_already_set();
  py::object error = py::handle(g_error_type)(message);
  error.attr("status") = status_name(s);
  error.attr("code") = static_cast<int>(s);
  PyErr_SetObject(g_error_type, error.ptr());
}

void check(moegrad_status s) {
  if (s == MOEGRAD_STATUS_SUCCESS) return;
  set_error(s, moegrad_last_error_message());
  throw py::error_already_set();
}

// A thread count from Python: an integer (not a bool, which Python counts
// as one: nor numpy's, nor a torch bool tensor), and one the library's range
// check can see whole, so 2**31 gets the library's message rather than
// pybind11's failed conversion.
int32_t thread_count(const py::handle value) {
  const std::string kind = py::str(py::type::handle_of(value).attr("__name__"));
  const bool torch_bool = kind == "Tensor" && py::hasattr(value, "dtype") &&
                          std::string(py::str(value.attr("dtype"))) == "torch.bool";
  if (PyBool_Check(value.ptr()) || kind == "bool_" || torch_bool)
    throw py::type_error("num_threads must be an integer, got " + kind + " " + std::string(py::repr(value)));
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) {
    PyErr_Clear();
    throw py::type_error("num_threads must be an integer, got " + kind + " " + std::string(py::repr(value)));
  }
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow == 0 && n >= INT32_MIN && n <= INT32_MAX) return static_cast<int32_t>(n);
  set_error(MOEGRAD_STATUS_INVALID_ARGUMENT, "num_threads=" + std::string(py::str(index)) + " is not in [0, " +
                                                 std::to_string(MOEGRAD_MAX_THREADS) + "] (0 = default)");
  throw py::error_already_set();
}

// A flag by the package's one rule (moegrad/_arrays.py, boolean): True or
// False, numpy's, a one-element bool array or tensor, 0 or 1; not any value
// Python would take as true (None, 0.5, the string "False").
bool flag(const char* name, const py::handle value) {
  return py::module_::import("moegrad._arrays").attr("boolean")(name, value).cast<bool>();
}

// A context owned by Python; None stands for the library's default context.
class Context {
 public:
  // num_threads 0 and isa "auto" keep what the new context took from the
  // environment (MOEGRAD_NUM_THREADS, MOEGRAD_ISA). Setting AUTO later picks
  // the best path instead, overriding MOEGRAD_ISA (the C API's AUTO), which
  // a copy records as kBestIsa so that it does the same.
  Context(int32_t num_threads, const std::string& isa, bool fast_bf16) {
    moegrad_context* raw = nullptr;
    check(moegrad_context_create(&raw));
    ctx_.reset(raw);
    set_num_threads(num_threads);
    if (isa != "auto") set_isa(isa);
    set_fast_bf16(fast_bf16);
  }
  void set_num_threads_from(const py::object& n) { set_num_threads(thread_count(n)); }
  void set_num_threads(int32_t n) {
    check(moegrad_context_set_num_threads(ctx_.get(), n));
    requested_threads_ = n;
  }
  int32_t num_threads() const {
    int32_t n = 0;
    check(moegrad_context_get_num_threads(ctx_.get(), &n));
    return n;
  }
  void set_isa(const std::string& name) {
    for (moegrad_isa isa : {MOEGRAD_ISA_AUTO, MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}) {
      if (name == moegrad_isa_name(isa)) {
        check(moegrad_context_set_isa(ctx_.get(), isa));
        requested_isa_ = isa == MOEGRAD_ISA_AUTO ? kBestIsa : name;
        return;
      }
    }
    throw py::value_error("isa='" + name + "' is not one of auto, scalar, avx2, avx512");
  }
  std::string isa() const {
    moegrad_isa isa = MOEGRAD_ISA_AUTO;
    check(moegrad_context_get_isa(ctx_.get(), &isa));
    return moegrad_isa_name(isa);
  }
  void set_fast_bf16(bool enable) { check(moegrad_context_set_fast_bf16(ctx_.get(), enable ? 1 : 0)); }
  bool fast_bf16() const { return ctx_->fast_bf16.load(); }
  const moegrad_context* get() const { return ctx_.get(); }

  // What a copy (pickle, copy.deepcopy: a module holding a context saved or
  // copied) is built from: the settings as asked for, so a default thread
  // count or ISA stays the default of the machine that loads it.
  py::tuple state() const { return py::make_tuple(requested_threads_, requested_isa_, fast_bf16()); }
  static Context from_state(const py::tuple& t) {
    if (t.size() != 3) throw std::runtime_error("moegrad.Context: unexpected pickled state");
    const auto isa = t[1].cast<std::string>();
    Context c(t[0].cast<int32_t>(), isa == kBestIsa ? "auto" : isa, t[2].cast<bool>());
    if (isa == kBestIsa) c.set_isa("auto");
    return c;
  }

 private:
  int32_t requested_threads_ = 0;
  // The state's ISA for "auto" set after construction: the best path, not
  // the environment's default that "auto" in the constructor keeps.
  static constexpr const char* kBestIsa = "auto (best)";
  std::string requested_isa_ = "auto";
  struct Deleter {
    void operator()(moegrad_context* c) const { moegrad_context_destroy(c); }
  };
  std::unique_ptr<moegrad_context, Deleter> ctx_;
};

const moegrad_context* raw(const Context* ctx) { return ctx == nullptr ? nullptr : ctx->get(); }

// Runs a one-shot C call without the GIL.
template <typename Args, typename Fn>
void run_released(Fn fn, const Args& args, const Context* ctx) {
  moegrad_status s;
  {
    py::gil_scoped_release release;
    s = fn(&args, raw(ctx));
  }
  check(s);
}

int64_t moe_init_routing(py::handle x, py::handle expert_idx, py::handle expanded_x, py::handle expanded_row_idx,
                         py::handle group_list, int64_t active_num, int64_t capacity, int32_t row_idx_type,
                         const Context* ctx) {
  const TensorRef tx(x, "x", false), te(expert_idx, "expert_idx", false), tex(expanded_x, "expanded_x", true),
      tidx(expanded_row_idx, "expanded_row_idx", true), tgl(group_list, "group_list", true);
  int64_t num_rows = 0;
  const moegrad_moe_init_routing_args args{tx.get(),   te.get(),        tex.get(),    tidx.get(), tgl.get(),
                                           active_num, capacity, row_idx_type, &num_rows};
  run_released(moegrad_moe_init_routing_run, args, ctx);
  return num_rows;
}

void grouped_matmul(py::handle x, py::handle weight, py::handle group_list, py::handle y, int32_t group_list_type,
                    const Context* ctx) {
  const TensorRef tx(x, "x", false), tw(weight, "weight", false), tgl(group_list, "group_list", false),
      ty(y, "y", true);
  const moegrad_grouped_matmul_args args{tx.get(), tw.get(), tgl.get(), ty.get(), group_list_type};
  run_released(moegrad_grouped_matmul_run, args, ctx);
}

void grouped_matmul_weight_grad(py::handle x, py::handle grad_y, py::handle group_list, py::handle grad_weight,
                                int32_t group_list_type, bool accumulate, const Context* ctx) {
  const TensorRef tx(x, "x", false), tgy(grad_y, "grad_y", false), tgl(group_list, "group_list", false),
      tgw(grad_weight, "grad_weight", true);
  const moegrad_grouped_matmul_weight_grad_args args{tx.get(),        tgy.get(),         tgl.get(),
                                                     tgw.get(),       group_list_type,   accumulate ? 1 : 0};
  run_released(moegrad_grouped_matmul_weight_grad_run, args, ctx);
}

void moe_init_routing_grad(py::handle grad_expanded_x, py::handle expanded_row_idx, py::handle grad_x,
                           int64_t batch, int64_t top_k, int32_t row_idx_type, const Context* ctx) {
  const TensorRef td(grad_expanded_x, "grad_expanded_x", false),
      tidx(expanded_row_idx, "expanded_row_idx", false), tgx(grad_x, "grad_x", true);
  const moegrad_moe_init_routing_grad_args args{td.get(), tidx.get(), tgx.get(), batch, top_k, row_idx_type};
  run_released(moegrad_moe_init_routing_grad_run, args, ctx);
}

void grad_x(py::handle grad_y, py::handle weight, py::handle expanded_row_idx, py::handle group_list,
            py::handle grad_x, int64_t batch, int64_t top_k, int32_t row_idx_type, int32_t group_list_type,
            const Context* ctx) {
  const TensorRef tgy(grad_y, "grad_y", false), tw(weight, "weight", false),
      tidx(expanded_row_idx, "expanded_row_idx", false), tgl(group_list, "group_list", false),
      tgx(grad_x, "grad_x", true);
  const moegrad_grad_x_args args{tgy.get(), tw.get(), tidx.get(),   tgl.get(),      tgx.get(),
                                 batch,     top_k,    row_idx_type, group_list_type};
  run_released(moegrad_grad_x_run, args, ctx);
}

// What `context` resolved to, beside what the CPU and OS offer (the keys of
// `moegrad info --json` that describe them; moegrad.info() adds the
// version).
py::dict context_info(const Context& context) {
  const moegrad::ContextInfo c = moegrad::describe_context(*context.get());
  py::list isas;
  for (const char* isa : c.isa_available) isas.append(isa);
  auto bytes_or_none = [](size_t b) { return b == 0 ? py::object(py::none()) : py::object(py::int_(b)); };
  py::dict d;
  d["cpu"] = c.cpu;
  d["isa"] = moegrad_isa_name(c.isa);
  d["isa_available"] = isas;
  d["avx512_bf16"] = c.avx512bf16;
  d["threads"] = c.threads;
  d["affinity_cpus"] = c.cpus.affinity;
  d["cgroup_cpu_limit"] = c.cpus.cgroup_limit ? py::object(py::float_(*c.cpus.cgroup_limit)) : py::object(py::none());
  d["usable_cpus"] = c.cpus.usable();
  d["engine"] = c.engine;
  d["l1d_bytes"] = c.caches.l1d;
  d["l2_bytes"] = c.caches.l2;
  d["os_l1d_bytes"] = bytes_or_none(c.os_l1d);
  d["os_l2_bytes"] = bytes_or_none(c.os_l2);
  // Decoded as os.environ decodes them, so no byte makes this raise.
  py::dict environment;
  for (const auto& [name, value] : c.environment) {
    environment[name] = value ? py::reinterpret_steal<py::object>(PyUnicode_DecodeFSDefault(value->c_str()))
                              : py::object(py::none());
  }
  d["environment"] = environment;
  py::dict ignored;
  for (const auto& [name, closest] : c.ignored_environment) {
    ignored[py::reinterpret_steal<py::object>(PyUnicode_DecodeFSDefault(name.c_str()))] =
        closest ? py::object(py::str(closest)) : py::object(py::none());
  }
  d["ignored_environment"] = ignored;
  return d;
}

int64_t max_rows(int64_t batch, int64_t top_k, int64_t num_experts, int64_t active_num, int64_t capacity) {
  int64_t rows = 0;
  check(moegrad_moe_init_routing_max_rows(batch, top_k, num_experts, active_num, capacity, &rows));
  return rows;
}

}  // namespace

PYBIND11_MODULE(_moegrad, m) {
  m.doc() = "moegrad C API bindings; use the `moegrad` package, not this module.";
  g_error_type = PyErr_NewExceptionWithDoc("moegrad.Error",
                                           "A moegrad call refused its arguments; .status names the moegrad_status, "
                                           ".code is its value, str() is the library's one-line message.",
                                           PyExc_ValueError, nullptr);
  if (g_error_type == nullptr) throw py::error_already_set();
  m.attr("Error") = py::handle(g_error_type);
  py::register_exception_translator([](std::exception_ptr pending) {
    try {
      if (pending) std::rethrow_exception(pending);
    } catch (const moegrad::python::ArrayError& e) {
      set_error(e.status, e.what());
    }
  });

  py::class_<Context>(m, "Context", "Thread count, instruction-set path and bf16 mode of moegrad runs.")
      .def(py::init([](const py::object& num_threads, const std::string& isa, const py::object& fast_bf16) {
             return Context(thread_count(num_threads), isa, flag("fast_bf16", fast_bf16));
           }),
           py::arg("num_threads") = 0, py::arg("isa") = "auto",
           py::arg("fast_bf16") = false,
           "num_threads=0 and isa='auto' keep the defaults (MOEGRAD_NUM_THREADS, MOEGRAD_ISA or the CPU); "
           "fast_bf16=True runs bf16 inputs with AVX512_BF16 pair products (README: Fast bf16 mode).")
      .def_property("num_threads", &Context::num_threads, &Context::set_num_threads_from)
      .def_property("isa", &Context::isa, &Context::set_isa)
      .def_property("fast_bf16", &Context::fast_bf16,
                    [](Context& c, const py::object& v) { c.set_fast_bf16(flag("fast_bf16", v)); })
      .def(py::pickle([](const Context& c) { return c.state(); },
                      [](const py::tuple& t) { return Context::from_state(t); }))
      // Protocols 2 and up (copy, deepcopy, torch.save) go through the state
      // above, which is the three settings only: a subclass keeps its class
      // but not its instance attributes. Below 2, pickle would build the
      // object through a base pybind11 cannot allocate, and abort: those
      // rebuild a plain Context with the package's Python function (pickle
      // cannot name an extension's).
      .def("__reduce_ex__", [](const py::object& self, int protocol) -> py::object {
        if (protocol >= 2) return py::module_::import("builtins").attr("object").attr("__reduce_ex__")(self, protocol);
        return py::make_tuple(py::module_::import("moegrad").attr("_context_from_state"),
                              py::make_tuple(self.cast<const Context&>().state()));
      });
  m.def("_context_from_state", &Context::from_state, py::arg("state"));
  m.def(
      "check_importable_capsule",
      [](py::handle capsule, const std::string& name, bool for_torch) {
        return moegrad::python::check_importable_capsule(capsule, name.c_str(), for_torch);
      },
      py::arg("capsule"), py::arg("name"), py::arg("for_torch"));

  const auto ctx = py::arg("context").none(true);
  m.def("moe_init_routing", &moe_init_routing, py::arg("x"), py::arg("expert_idx"), py::arg("expanded_x"),
        py::arg("expanded_row_idx"), py::arg("group_list"), py::arg("active_num"), py::arg("capacity"),
        py::arg("row_idx_type"), ctx, "Returns M, the kept rows.");
  m.def("grouped_matmul", &grouped_matmul, py::arg("x"), py::arg("weight"), py::arg("group_list"), py::arg("y"),
        py::arg("group_list_type"), ctx);
  m.def("grouped_matmul_weight_grad", &grouped_matmul_weight_grad, py::arg("x"), py::arg("grad_y"),
        py::arg("group_list"), py::arg("grad_weight"), py::arg("group_list_type"), py::arg("accumulate"), ctx);
  m.def("moe_init_routing_grad", &moe_init_routing_grad, py::arg("grad_expanded_x"), py::arg("expanded_row_idx"),
        py::arg("grad_x"), py::arg("batch"), py::arg("top_k"), py::arg("row_idx_type"), ctx);
  m.def("grad_x", &grad_x, py::arg("grad_y"), py::arg("weight"), py::arg("expanded_row_idx"),
        py::arg("group_list"), py::arg("grad_x"), py::arg("batch"), py::arg("top_k"), py::arg("row_idx_type"),
        py::arg("group_list_type"), ctx);
  m.def("max_rows", &max_rows, py::arg("batch"), py::arg("top_k"), py::arg("num_experts"), py::arg("active_num"),
        py::arg("capacity"));
  m.def("version", &moegrad_version);
  m.def("context_info", &context_info, py::arg("context"));
  m.def("isa_available", [](const std::string& name) {
    for (moegrad_isa isa : {MOEGRAD_ISA_AUTO, MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512})
      if (name == moegrad_isa_name(isa)) return moegrad_isa_available(isa) != 0;
    throw py::value_error("isa='" + name + "' is not one of auto, scalar, avx2, avx512");
  });
}
