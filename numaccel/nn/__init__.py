"""numaccel.nn: layers, functional ops and optimizers on NumPy arrays."""
