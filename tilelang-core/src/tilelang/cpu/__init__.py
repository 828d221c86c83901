"""The built-in CPU target backend (TVM target kinds ``llvm`` and ``c``)."""
