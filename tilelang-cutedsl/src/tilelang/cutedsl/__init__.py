"""TileLang's CuTeDSL backend: the ``cutedsl`` target backend on the ``cuda`` kind (told
apart from ``cuda`` by the target key ``cutedsl``), its router, the ``cutedsl`` execution
backend and the ``T.ext`` extensions only it implements. Importing this package imports
neither TVM nor CuTe DSL."""
