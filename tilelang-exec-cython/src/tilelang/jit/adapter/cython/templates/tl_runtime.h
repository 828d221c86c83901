/* tl_runtime.h: what every generated TileLang launcher shares (tensor views, checks,
 * output allocation, the CUDA driver), included by the kernel's generated tl_kernel.h
 * after it has defined TL_DEVICE_TYPE, TL_NUM_OUTPUTS and, for CUDA, TL_NUM_LAUNCHES.
 *
 * Tensors are read without creating Python objects:
 * - torch tensors through the DLPack C exchange API (dlpack.h, DLPackExchangeAPI:
 *   dltensor_from_py_object_no_sync fills a stack DLTensor, current_work_stream gives the
 *   caller's stream), found once on torch.Tensor.__dlpack_c_exchange_api__;
 * - numpy arrays through the buffer protocol (PEP 3118: format, shape, byte strides).
 * A check that fails returns to the Cython wrapper, which lets the shared Python binder
 * word the error; so nothing here decides an error message about arguments.
 */
#ifndef TL_RUNTIME_H_
#define TL_RUNTIME_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlpack/dlpack.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if TL_DEVICE_TYPE != 1
#include <dlfcn.h>
#else
#include <tvm/ffi/c_api.h>
#endif

#define TL_MAX_DEVICES 64

/* why the fast path gave up (the Python side turns this into an error message when the
 * shared binder accepts the arguments anyway) */
enum {
  TL_OK = 0, TL_MISS_ARGC, TL_MISS_NOT_TENSOR, TL_MISS_DTYPE, TL_MISS_DEVICE, TL_MISS_NDIM,
  TL_MISS_SHAPE, TL_MISS_SYMBOL, TL_MISS_STRIDES, TL_MISS_ALIGN, TL_MISS_SCALAR,
  TL_MISS_RANGE, TL_MISS_DEVICE_ID, TL_MISS_NO_TORCH
};

/* ---- integer helpers with Python's semantics (launch expressions) ---------------- */
static inline int64_t tl_floordiv(int64_t a, int64_t b) {
  if (b == 0) return 0; /* never produced by a valid launch; avoids a trap */
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t tl_floormod(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline double tl_floormod_f(double a, double b) { return a - floor(a / b) * b; }
static inline int64_t tl_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t tl_max(int64_t a, int64_t b) { return a > b ? a : b; }

/* float -> IEEE half / bfloat16 bits, round to nearest even (kernel scalar operands) */
static inline uint16_t tl_bfloat16_bits(double value) {
  float f = (float)value;
  uint32_t bits;
  memcpy(&bits, &f, 4);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu)) return 0x7FC0;
  return (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
static inline uint16_t tl_float16_bits(double value) {
  /* straight from the double, like struct.pack("e"): no double rounding through float */
  uint64_t x;
  memcpy(&x, &value, 8);
  uint16_t sign = (uint16_t)((x >> 48) & 0x8000u);
  int e = (int)((x >> 52) & 0x7FF) - 1023 + 15;
  uint64_t mant = x & 0xFFFFFFFFFFFFFull;
  if (e == 0x7FF - 1023 + 15) return (uint16_t)(sign | 0x7C00u | (mant ? 0x200u : 0u));
  if (e >= 0x1F) return (uint16_t)(sign | 0x7C00u);
  int shift = 42;
  uint64_t half;
  if (e <= 0) {            /* a subnormal half (or zero) */
    if (e < -10) return sign;
    mant |= 1ull << 52;
    shift = 43 - e;
    half = mant >> shift;
  } else {
    half = ((uint64_t)e << 10) | (mant >> shift);
  }
  uint64_t rest = mant & ((1ull << shift) - 1), halfway = 1ull << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) half++; /* a carry is still right */
  return (uint16_t)(sign | half);
}

/* ---- the launcher's state --------------------------------------------------------- */
#if TL_DEVICE_TYPE != 1
typedef int tl_CUresult; /* CUDA Driver API types, declared here: no cuda.h needed */
typedef int tl_CUdevice;
typedef void* tl_CUcontext;
typedef void* tl_CUmodule;
typedef void* tl_CUfunction;
typedef struct {
  tl_CUresult (*init)(unsigned int);
  tl_CUresult (*device_get)(tl_CUdevice*, int);
  tl_CUresult (*primary_ctx_retain)(tl_CUcontext*, tl_CUdevice);
  tl_CUresult (*ctx_get_current)(tl_CUcontext*);
  tl_CUresult (*ctx_push)(tl_CUcontext);
  tl_CUresult (*ctx_pop)(tl_CUcontext*);
  tl_CUresult (*module_load_data)(tl_CUmodule*, const void*);
  tl_CUresult (*module_unload)(tl_CUmodule);
  tl_CUresult (*module_get_function)(tl_CUfunction*, tl_CUmodule, const char*);
  tl_CUresult (*func_set_attribute)(tl_CUfunction, int, int);
  tl_CUresult (*launch_kernel)(tl_CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, void*, void**, void**);
  /* every block resident at once (a kernel that calls T.sync_grid) */
  tl_CUresult (*launch_cooperative_kernel)(tl_CUfunction, unsigned, unsigned, unsigned, unsigned,
                                           unsigned, unsigned, unsigned, void*, void**);
  tl_CUresult (*get_error_name)(tl_CUresult, const char**);
} tl_cuda_api;
typedef struct {
  tl_CUcontext ctx;
  tl_CUmodule module;
  tl_CUfunction functions[TL_NUM_LAUNCHES];
  int64_t smem_limit[TL_NUM_LAUNCHES];
} tl_cuda_device;
#endif

typedef struct {
  int miss_code, miss_arg;    /* why the last call left the fast path */
  const char* kernel;         /* for messages; owned by `config` */
  PyObject* miss;             /* sentinel returned on a miss */
  PyObject* launch_error;     /* tilelang.errors.LaunchError */
  PyTypeObject* torch_tensor; /* torch.Tensor, or NULL without torch */
  const DLPackExchangeAPI* dlpack;
  PyTypeObject* ndarray;      /* numpy.ndarray */
  PyTypeObject* masked_array; /* numpy.ma.MaskedArray: refused (its mask would be ignored);
                                NULL before numpy.ma is imported: every ndarray subclass misses */
  PyObject* torch_empty;      /* torch.empty */
  PyObject* numpy_empty;      /* numpy.empty */
  PyObject* torch_kwnames;    /* ("dtype", "device") */
  PyObject* torch_device;     /* torch.device */
  PyObject* device_name;      /* "cpu" or "cuda" */
  PyObject* torch_dtypes[TL_NUM_OUTPUTS + 1];
  PyObject* numpy_dtypes[TL_NUM_OUTPUTS + 1];
  PyObject* devices[TL_MAX_DEVICES]; /* torch.device per index, made on first use (owned) */
#if TL_DEVICE_TYPE != 1
  tl_cuda_api cu;
  const char* cubin;          /* owned by `config` */
  tl_cuda_device cuda[TL_MAX_DEVICES];
#endif
} tl_state;

/* ---- tensor views ------------------------------------------------------------------ */
typedef struct {
  DLTensor dl;          /* shape in elements; strides in elements (torch) or bytes (numpy) */
  int64_t stride_unit;  /* 1 (torch) or the item size (numpy) */
  int is_torch;
  int has_buffer;
  Py_buffer buffer;
} tl_view;

static inline char* tl_data(const tl_view* v) { return (char*)v->dl.data + v->dl.byte_offset; }

static inline int tl_numpy_dtype(const char* format, Py_ssize_t itemsize, DLDataType* out) {
  if (*format == '@' || *format == '=' || *format == '<') format++;
  if (format[0] == '\0' || format[1] != '\0') return -1;
  out->lanes = 1;
  out->bits = (uint8_t)(itemsize * 8);
  switch (format[0]) {
    case '?': out->code = kDLBool; return 0;
    case 'b': case 'h': case 'i': case 'l': case 'q': out->code = kDLInt; return 0;
    case 'B': case 'H': case 'I': case 'L': case 'Q': out->code = kDLUInt; return 0;
    case 'e': case 'f': case 'd': out->code = kDLFloat; return 0;
    default: return -1;
  }
}

/* 0: `obj` is a torch tensor or numpy array, viewed in `v`; -1: it is not, or `writable`
 * is asked of a read-only numpy array (no error set; the shared binder words it) */
static inline int tl_view_of(tl_state* st, PyObject* obj, tl_view* v, int writable) {
  if (st->torch_tensor != NULL && PyObject_TypeCheck(obj, st->torch_tensor)) {
    if (st->dlpack->dltensor_from_py_object_no_sync(obj, &v->dl) != 0) {
      PyErr_Clear(); /* e.g. a tensor DLPack cannot describe; the binder will say why */
      return -1;
    }
    v->stride_unit = 1;
    v->is_torch = 1;
    return 0;
  }
  if (st->ndarray != NULL && PyObject_TypeCheck(obj, st->ndarray)) {
    if (st->masked_array != NULL ? PyObject_TypeCheck(obj, st->masked_array)
                                 : Py_TYPE(obj) != st->ndarray) {
      return -1;
    }
    if (PyObject_GetBuffer(obj, &v->buffer, writable ? PyBUF_RECORDS : PyBUF_RECORDS_RO) != 0) {
      PyErr_Clear();
      return -1;
    }
    v->has_buffer = 1;
    if (tl_numpy_dtype(v->buffer.format, v->buffer.itemsize, &v->dl.dtype) != 0) {
      v->dl.dtype.code = 255; /* a dtype no kernel takes: fails the dtype check */
    }
    v->dl.data = v->buffer.buf;
    v->dl.byte_offset = 0;
    v->dl.device.device_type = kDLCPU;
    v->dl.device.device_id = 0;
    v->dl.ndim = v->buffer.ndim;
    v->dl.shape = (int64_t*)v->buffer.shape;   /* Py_ssize_t is int64_t on LP64 hosts */
    v->dl.strides = (int64_t*)v->buffer.strides;
    v->stride_unit = v->buffer.itemsize;
    v->is_torch = 0;
    return 0;
  }
  return -1;
}

static inline void tl_view_release(tl_view* v) {
  if (v->has_buffer) {
    PyBuffer_Release(&v->buffer);
    v->has_buffer = 0;
  }
}

static inline int tl_dtype_is(const tl_view* v, int code, int bits) {
  return v->dl.dtype.code == code && v->dl.dtype.bits == bits && v->dl.dtype.lanes == 1;
}

/* row-major compact, ignoring the strides of size-1 axes; empty tensors qualify
 * (torch's is_contiguous and numpy's C_CONTIGUOUS flag agree on both rules) */
static inline int tl_contiguous(const tl_view* v) {
  const int64_t* strides = v->dl.strides;
  int64_t expected = v->stride_unit;
  if (strides == NULL) return 1;
  for (int d = 0; d < v->dl.ndim; ++d) {
    if (v->dl.shape[d] == 0) return 1;
  }
  for (int d = v->dl.ndim - 1; d >= 0; --d) {
    int64_t extent = v->dl.shape[d];
    if (extent != 1 && strides[d] != expected) return 0;
    expected *= extent;
  }
  return 1;
}

static inline int tl_stride_is(const tl_view* v, int axis, int64_t elements) {
  if (v->dl.strides == NULL) {
    int64_t compact = 1;
    for (int d = axis + 1; d < v->dl.ndim; ++d) compact *= v->dl.shape[d];
    return compact == elements;
  }
  return v->dl.strides[axis] == elements * v->stride_unit;
}

/* ---- scalars (the shared binder's rules: no bool for integers, anything with
 * __index__; numbers or anything with __float__ for floats) --------------------------- */
/* A pointer parameter (`a_ptr: T.ptr`), as the shared binder takes it: None (a null
 * pointer), an address as an int (x.data_ptr()), or a tensor, whose data pointer it is.
 * 0: *out is the address; 1: a tensor, viewed in `v` (the caller checks its device);
 * -1: none of these (no error set; the binder words it) */
static inline int tl_address_arg(tl_state* st, PyObject* obj, tl_view* v, int64_t* out) {
  if (obj == Py_None) {
    *out = 0;
    return 0;
  }
  if (PyLong_CheckExact(obj)) {
    unsigned long long address = PyLong_AsUnsignedLongLong(obj);
    if (address == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
    *out = (int64_t)address;
    return 0;
  }
  if (tl_view_of(st, obj, v, 0) == 0) {
    *out = (int64_t)(uintptr_t)tl_data(v);
    return 1;
  }
  if (!PyBool_Check(obj) && PyIndex_Check(obj)) { /* a numpy integer, as the binder takes it */
    PyObject* index = PyNumber_Index(obj);
    unsigned long long address;
    if (index == NULL) { PyErr_Clear(); return -1; }
    address = PyLong_AsUnsignedLongLong(index);
    Py_DECREF(index);
    if (address == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
    *out = (int64_t)address;
    return 0;
  }
  return -1;
}

static inline int tl_int_arg(PyObject* obj, int64_t lo, uint64_t hi, int64_t* out) {
  PyObject* index;
  long long value;
  if (PyBool_Check(obj)) return -1;
  if (PyLong_CheckExact(obj)) {
    index = obj;
    Py_INCREF(index);
  } else if (PyIndex_Check(obj)) {
    index = PyNumber_Index(obj);
    if (index == NULL) { PyErr_Clear(); return -1; }
  } else {
    return -1;
  }
  value = PyLong_AsLongLong(index);
  if (value == -1 && PyErr_Occurred()) {
    /* above INT64_MAX: only uint64 parameters may take it */
    unsigned long long big;
    PyErr_Clear();
    big = PyLong_AsUnsignedLongLong(index);
    Py_DECREF(index);
    if (big == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return -2; }
    if (big > hi) return -2;
    *out = (int64_t)big;
    return 0;
  }
  Py_DECREF(index);
  if (value < lo || (value > 0 && (uint64_t)value > hi)) return -2;
  *out = value;
  return 0;
}

static inline int tl_float_arg(PyObject* obj, double* out) {
  if (PyFloat_CheckExact(obj)) { *out = PyFloat_AS_DOUBLE(obj); return 0; }
  if (PyLong_Check(obj) || (Py_TYPE(obj)->tp_as_number && Py_TYPE(obj)->tp_as_number->nb_float)) {
    *out = PyFloat_AsDouble(obj);
    if (*out == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
    return 0;
  }
  return -1;
}

static inline int tl_bool_arg(PyObject* obj, int64_t* out) {
  int truth = PyObject_IsTrue(obj);
  if (truth < 0) { PyErr_Clear(); return -1; }
  *out = truth;
  return 0;
}

#if TL_DEVICE_TYPE == 1
/* A failed compute function (an assert of tl.bounds_check, ...) raised its error in TVM
 * FFI's thread-local slot, as TVM's C codegen does: raise it as the LaunchError's text. */
static void tl_raise_compute_error(tl_state* st, const char* symbol, int32_t rc) {
  TVMFFIObjectHandle error = NULL;
  TVMFFIErrorMoveFromRaised(&error);
  if (error == NULL) {
    PyErr_Format(st->launch_error, "kernel '%s': its compute function %s failed (returned %d)",
                 st->kernel, symbol, (int)rc);
    return;
  }
  {
    const TVMFFIErrorCell* cell = (const TVMFFIErrorCell*)((char*)error + sizeof(TVMFFIObject));
    PyObject* kind = PyUnicode_DecodeUTF8(cell->kind.data, (Py_ssize_t)cell->kind.size, "replace");
    PyObject* text = PyUnicode_DecodeUTF8(cell->message.data, (Py_ssize_t)cell->message.size, "replace");
    if (kind != NULL && text != NULL) {
      PyErr_Format(st->launch_error, "kernel '%s' failed: %U: %U", st->kernel, kind, text);
    }
    Py_XDECREF(kind);
    Py_XDECREF(text);
  }
  TVMFFIObjectDecRef(error);
}
#endif

/* ---- outputs: torch.empty on the first tensor's device, or numpy.empty ------------- */
static PyObject* tl_torch_device(tl_state* st, int index) {
  if (index < 0 || index >= TL_MAX_DEVICES) {
    PyErr_Format(PyExc_RuntimeError, "kernel '%s': device index %d is out of range", st->kernel, index);
    return NULL;
  }
  if (st->devices[index] == NULL) {
#if TL_DEVICE_TYPE == 1
    /* torch.device("cpu"), as the shared binder's outputs have (not "cpu:0") */
    st->devices[index] = PyObject_CallFunctionObjArgs(st->torch_device, st->device_name, NULL);
#else
    st->devices[index] = PyObject_CallFunction(st->torch_device, "Oi", st->device_name, index);
#endif
  }
  return st->devices[index];
}

static PyObject* tl_empty(tl_state* st, int out, const tl_view* like, int ndim, const int64_t* shape) {
  PyObject* dims = PyTuple_New(ndim);
  PyObject* result = NULL;
  if (dims == NULL) return NULL;
  for (int d = 0; d < ndim; ++d) {
    PyObject* extent = PyLong_FromLongLong(shape[d]);
    if (extent == NULL) { Py_DECREF(dims); return NULL; }
    PyTuple_SET_ITEM(dims, d, extent);
  }
  if (like != NULL && like->is_torch) {
    PyObject* device = tl_torch_device(st, like->dl.device.device_id);
    if (device != NULL) {
      PyObject* argv[4] = {NULL, dims, st->torch_dtypes[out], device};
      result = PyObject_Vectorcall(st->torch_empty, argv + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                   st->torch_kwnames);
    }
  } else {
    PyObject* argv[3] = {NULL, dims, st->numpy_dtypes[out]};
    result = PyObject_Vectorcall(st->numpy_empty, argv + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
  }
  Py_DECREF(dims);
  return result;
}

/* ---- state set-up from the Python-side config (which keeps every object alive) ------ */
static int tl_borrow(PyObject* config, const char* name, PyObject** out) {
  PyObject* value = PyObject_GetAttrString(config, name);
  if (value == NULL) return -1;
  *out = value == Py_None ? NULL : value;
  Py_DECREF(value); /* `config` holds the reference */
  return 0;
}

static int tl_borrow_items(PyObject* config, const char* name, PyObject** out, Py_ssize_t n) {
  PyObject* items = PyObject_GetAttrString(config, name);
  if (items == NULL) return -1;
  if (!PyTuple_Check(items) || PyTuple_GET_SIZE(items) != n) {
    Py_DECREF(items);
    PyErr_Format(PyExc_ValueError, "launcher config: %s must be a tuple of %zd", name, n);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(items, i);
    out[i] = item == Py_None ? NULL : item;
  }
  Py_DECREF(items);
  return 0;
}

static int tl_state_init_common(tl_state* st, PyObject* config) {
  PyObject *kernel, *torch_tensor, *dlpack, *ndarray, *masked_array, *cubin;
  memset(st, 0, sizeof(*st));
  if (tl_borrow(config, "kernel", &kernel) || tl_borrow(config, "miss", &st->miss) ||
      tl_borrow(config, "launch_error", &st->launch_error) ||
      tl_borrow(config, "torch_tensor", &torch_tensor) || tl_borrow(config, "dlpack_api", &dlpack) ||
      tl_borrow(config, "ndarray", &ndarray) || tl_borrow(config, "masked_array", &masked_array) ||
      tl_borrow(config, "torch_empty", &st->torch_empty) ||
      tl_borrow(config, "numpy_empty", &st->numpy_empty) ||
      tl_borrow(config, "torch_kwnames", &st->torch_kwnames) ||
      tl_borrow(config, "torch_device", &st->torch_device) ||
      tl_borrow(config, "device_name", &st->device_name) || tl_borrow(config, "cubin", &cubin) ||
      tl_borrow_items(config, "torch_dtypes", st->torch_dtypes, TL_NUM_OUTPUTS) ||
      tl_borrow_items(config, "numpy_dtypes", st->numpy_dtypes, TL_NUM_OUTPUTS)) {
    return -1;
  }
  st->kernel = PyUnicode_AsUTF8(kernel);
  if (st->kernel == NULL) return -1;
  st->torch_tensor = (PyTypeObject*)torch_tensor;
  st->ndarray = (PyTypeObject*)ndarray;
  st->masked_array = (PyTypeObject*)masked_array;
  if (st->torch_tensor != NULL) {
    st->dlpack = (const DLPackExchangeAPI*)PyCapsule_GetPointer(dlpack, "dlpack_exchange_api");
    if (st->dlpack == NULL) return -1;
    if (st->dlpack->header.version.major != DLPACK_MAJOR_VERSION ||
        st->dlpack->dltensor_from_py_object_no_sync == NULL) {
      PyErr_SetString(PyExc_RuntimeError, "torch's DLPack exchange API is not a version this "
                      "launcher was built for (DLPack 1.x with dltensor_from_py_object_no_sync)");
      return -1;
    }
  }
#if TL_DEVICE_TYPE != 1
  if (cubin == NULL || (st->cubin = PyBytes_AsString(cubin)) == NULL) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "launcher config: no cubin");
    return -1;
  }
#else
  (void)cubin;
#endif
  return 0;
}

static void tl_state_clear_common(tl_state* st) {
  for (int i = 0; i < TL_MAX_DEVICES; ++i) Py_CLEAR(st->devices[i]);
}

#if TL_DEVICE_TYPE != 1
#include "tl_cuda.h"
#endif

/* the launcher's __cinit__ / __dealloc__ (launcher.pyx) */
static int tl_state_init(tl_state* st, PyObject* config) {
  if (tl_state_init_common(st, config) != 0) return -1;
#if TL_DEVICE_TYPE != 1
  {
    PyObject* unavailable;
    if (tl_borrow(config, "unavailable_error", &unavailable) != 0) return -1;
    if (tl_cuda_open(st, unavailable) != 0) return -1;
  }
#endif
  return 0;
}

static void tl_state_clear(tl_state* st) {
#if TL_DEVICE_TYPE != 1
  if (st->cu.module_unload != NULL) tl_cuda_unload(st);
#endif
  tl_state_clear_common(st);
}

#endif /* TL_RUNTIME_H_ */
