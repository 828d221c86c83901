"""The built-in ``tvm_ffi`` execution backend."""
