# Epoch 1 (PEP 440): upstream TileLang publishes "tilelang" 0.1.x on PyPI, and pip takes
# the highest version it can see, so an epoch-0 version here loses to upstream's whenever
# PyPI is reachable (even "==0.1.0" matches upstream's own 0.1.0). Every epoch-1 version
# is newer than every epoch-0 one; see the README's "Installing" section.
__version__ = "1!0.1.0"
