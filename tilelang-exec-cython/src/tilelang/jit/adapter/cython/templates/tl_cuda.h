/* tl_cuda.h: the CUDA Driver API as a generated launcher uses it (included by
 * tl_runtime.h for device kernels). libcuda.so.1 is opened with dlopen when the launcher
 * is created, so the extension has no link-time dependency on the driver and imports on
 * machines without one. Reference: CUDA Driver API, "Initialization", "Primary Context
 * Management", "Context Management", "Module Management", "Execution Control"
 * (https://docs.nvidia.com/cuda/cuda-driver-api/).
 *
 * A cubin is loaded lazily, once per device, into that device's primary context (the one
 * torch and the CUDA runtime use). A call launches in the tensors' device's context: when
 * another context is current (another device, or a thread that never touched CUDA), that
 * primary context is pushed for the launch and popped after, like torch's device guard.
 * Every call holds the GIL, which serializes access to this state.
 */
#ifndef TL_CUDA_H_
#define TL_CUDA_H_

#define TL_CUDA_ERROR_INVALID_CONTEXT 201
#define TL_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
/* up to 48 KiB of shared memory needs no opt-in (CUDA C++ Programming Guide, "Shared
 * Memory": larger allocations must raise the function's limit first); the 48 KiB count a
 * kernel's static shared memory too, which this launcher does not query, so the limit
 * starts at 0: the first launch with dynamic shared memory raises it to what it asks */
#define TL_DEFAULT_DYNAMIC_SMEM_LIMIT 0

static const char* tl_cuda_error_name(tl_state* st, tl_CUresult code) {
  const char* name = NULL;
  if (st->cu.get_error_name == NULL || st->cu.get_error_name(code, &name) != 0 || name == NULL) {
    return "an unknown CUresult";
  }
  return name;
}

static int tl_cuda_failed(tl_state* st, const char* what, tl_CUresult code) {
  PyErr_Format(st->launch_error, "kernel '%s': %s failed with %s (%d)", st->kernel, what,
               tl_cuda_error_name(st, code), (int)code);
  return -1;
}

#define TL_CUDA_SYMBOL(field, name)                                                    \
  do {                                                                                 \
    *(void**)(&st->cu.field) = dlsym(lib, name);                                       \
    if (st->cu.field == NULL) {                                                        \
      PyErr_Format(unavailable, "the CUDA driver (libcuda.so.1) has no %s", name);     \
      return -1;                                                                       \
    }                                                                                  \
  } while (0)

/* load the driver's entry points and initialize it; `unavailable` is the error type */
static int tl_cuda_open(tl_state* st, PyObject* unavailable) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  tl_CUresult result;
  if (lib == NULL) {
    PyErr_Format(unavailable, "no CUDA driver on this machine (libcuda.so.1 cannot be loaded: %s)",
                 dlerror());
    return -1;
  }
  /* versioned names, as cuda.h maps them (cuCtxPushCurrent -> cuCtxPushCurrent_v2 ...) */
  TL_CUDA_SYMBOL(init, "cuInit");
  TL_CUDA_SYMBOL(device_get, "cuDeviceGet");
  TL_CUDA_SYMBOL(primary_ctx_retain, "cuDevicePrimaryCtxRetain");
  TL_CUDA_SYMBOL(ctx_get_current, "cuCtxGetCurrent");
  TL_CUDA_SYMBOL(ctx_push, "cuCtxPushCurrent_v2");
  TL_CUDA_SYMBOL(ctx_pop, "cuCtxPopCurrent_v2");
  TL_CUDA_SYMBOL(module_load_data, "cuModuleLoadData");
  TL_CUDA_SYMBOL(module_unload, "cuModuleUnload");
  TL_CUDA_SYMBOL(module_get_function, "cuModuleGetFunction");
  TL_CUDA_SYMBOL(func_set_attribute, "cuFuncSetAttribute");
  TL_CUDA_SYMBOL(launch_kernel, "cuLaunchKernel");
  TL_CUDA_SYMBOL(launch_cooperative_kernel, "cuLaunchCooperativeKernel");
  TL_CUDA_SYMBOL(get_error_name, "cuGetErrorName");
  result = st->cu.init(0);
  if (result != 0) {
    PyErr_Format(unavailable, "the CUDA driver failed to initialize (cuInit: %s): is a GPU "
                 "visible to this process?", tl_cuda_error_name(st, result));
    return -1;
  }
  return 0;
}

/* the device's primary context, its module and functions (first call on a device) */
static int tl_cuda_load(tl_state* st, int device) {
  tl_cuda_device* d = &st->cuda[device];
  tl_CUdevice dev;
  tl_CUcontext popped;
  tl_CUresult result = st->cu.device_get(&dev, device);
  if (result != 0) return tl_cuda_failed(st, "cuDeviceGet", result);
  /* retained once per device and launcher, never released: torch holds it as well */
  if (d->ctx == NULL && (result = st->cu.primary_ctx_retain(&d->ctx, dev)) != 0) {
    return tl_cuda_failed(st, "cuDevicePrimaryCtxRetain", result);
  }
  if ((result = st->cu.ctx_push(d->ctx)) != 0) return tl_cuda_failed(st, "cuCtxPushCurrent", result);
  result = st->cu.module_load_data(&d->module, st->cubin);
  if (result != 0) {
    d->module = NULL;
    st->cu.ctx_pop(&popped);
    return tl_cuda_failed(st, "cuModuleLoadData (loading the cubin)", result);
  }
  for (int i = 0; i < TL_NUM_LAUNCHES; ++i) {
    result = st->cu.module_get_function(&d->functions[i], d->module, tl_symbols[i]);
    if (result != 0) {
      st->cu.module_unload(d->module);
      d->module = NULL;
      st->cu.ctx_pop(&popped);
      PyErr_Format(st->launch_error, "kernel '%s': cuModuleGetFunction('%s') failed with %s",
                   st->kernel, tl_symbols[i], tl_cuda_error_name(st, result));
      return -1;
    }
    d->smem_limit[i] = TL_DEFAULT_DYNAMIC_SMEM_LIMIT;
  }
  st->cu.ctx_pop(&popped);
  return 0;
}

typedef struct {
  tl_cuda_device* device;
  int pushed;
} tl_cuda_scope;

/* make `device`'s context current for the launches of one call */
static int tl_cuda_enter(tl_state* st, int device, tl_cuda_scope* scope) {
  tl_CUcontext current = NULL;
  tl_CUresult result;
  if (device < 0 || device >= TL_MAX_DEVICES) {
    PyErr_Format(st->launch_error, "kernel '%s': CUDA device %d is out of range", st->kernel, device);
    return -1;
  }
  scope->device = &st->cuda[device];
  scope->pushed = 0;
  if (scope->device->module == NULL && tl_cuda_load(st, device) != 0) return -1;
  st->cu.ctx_get_current(&current);
  if (current != scope->device->ctx) {
    if ((result = st->cu.ctx_push(scope->device->ctx)) != 0) {
      return tl_cuda_failed(st, "cuCtxPushCurrent", result);
    }
    scope->pushed = 1;
  }
  return 0;
}

static inline void tl_cuda_exit(tl_state* st, tl_cuda_scope* scope) {
  tl_CUcontext popped;
  if (scope->pushed) st->cu.ctx_pop(&popped);
}

/* likely causes, by CUresult name (sticky errors come from an earlier kernel) */
static const char* tl_cuda_hint(const char* name) {
  if (strcmp(name, "CUDA_ERROR_INVALID_VALUE") == 0)
    return ": a grid or block extent, or the shared memory size, is out of range";
  if (strcmp(name, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES") == 0)
    return ": the block needs more registers or threads than the GPU has";
  if (strcmp(name, "CUDA_ERROR_ILLEGAL_ADDRESS") == 0 || strcmp(name, "CUDA_ERROR_LAUNCH_FAILED") == 0)
    return ": an earlier asynchronous kernel failed; the context is unusable";
  if (strcmp(name, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE") == 0)
    return ": the kernel waits at T.sync_grid, so every block must be resident at once, and the grid "
           "has more blocks than the GPU holds together; launch at most the SM count times the blocks "
           "one SM holds (a persistent grid)";
  return "";
}

static int tl_cuda_launch(tl_state* st, tl_cuda_scope* scope, int index, const int64_t* grid,
                          const int64_t* block, int64_t smem, void* stream, void** params) {
  tl_cuda_device* d = scope->device;
  tl_CUresult result;
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return 0; /* an empty problem */
  if (grid[0] < 0 || grid[1] < 0 || grid[2] < 0) {
    PyErr_Format(st->launch_error, "kernel '%s': launch of '%s' has a negative grid (%lld, %lld, %lld)",
                 st->kernel, tl_symbols[index], (long long)grid[0], (long long)grid[1], (long long)grid[2]);
    return -1;
  }
  if (smem > d->smem_limit[index]) {
    result = st->cu.func_set_attribute(d->functions[index],
                                       TL_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem);
    if (result != 0) {
      PyErr_Format(st->launch_error, "kernel '%s': '%s' needs %lld bytes of dynamic shared memory, "
                   "which cuFuncSetAttribute refused with %s; use smaller tiles", st->kernel,
                   tl_symbols[index], (long long)smem, tl_cuda_error_name(st, result));
      return -1;
    }
    d->smem_limit[index] = smem;
  }
  if (tl_cooperative[index]) {
    result = st->cu.launch_cooperative_kernel(d->functions[index], (unsigned)grid[0], (unsigned)grid[1],
                                              (unsigned)grid[2], (unsigned)block[0], (unsigned)block[1],
                                              (unsigned)block[2], (unsigned)smem, stream, params);
  } else {
    result = st->cu.launch_kernel(d->functions[index], (unsigned)grid[0], (unsigned)grid[1],
                                  (unsigned)grid[2], (unsigned)block[0], (unsigned)block[1],
                                  (unsigned)block[2], (unsigned)smem, stream, params, NULL);
  }
  if (result != 0) {
    const char* name = tl_cuda_error_name(st, result);
    PyErr_Format(st->launch_error, "kernel '%s': %s('%s', grid (%lld, %lld, %lld), block "
                 "(%lld, %lld, %lld), %lld bytes dynamic shared memory) failed with %s (%d)%s",
                 st->kernel, tl_cooperative[index] ? "cuLaunchCooperativeKernel" : "cuLaunchKernel",
                 tl_symbols[index], (long long)grid[0], (long long)grid[1],
                 (long long)grid[2], (long long)block[0], (long long)block[1], (long long)block[2],
                 (long long)smem, name, (int)result, tl_cuda_hint(name));
    return -1;
  }
  return 0;
}

/* the device of a call without tensor arguments: the current context's, else 0 */
static int tl_cuda_current_device(tl_state* st) {
  tl_CUcontext current = NULL;
  st->cu.ctx_get_current(&current);
  for (int i = 0; i < TL_MAX_DEVICES; ++i) {
    if (current != NULL && st->cuda[i].ctx == current) return i;
  }
  return 0;
}

/* unload every module from its own context; errors are dropped (runs from dealloc,
 * possibly while the driver shuts down) */
static void tl_cuda_unload(tl_state* st) {
  tl_CUcontext popped;
  for (int i = 0; i < TL_MAX_DEVICES; ++i) {
    tl_cuda_device* d = &st->cuda[i];
    if (d->module == NULL || st->cu.ctx_push(d->ctx) != 0) continue;
    st->cu.module_unload(d->module);
    d->module = NULL;
    st->cu.ctx_pop(&popped);
  }
}

#endif /* TL_CUDA_H_ */
