"""The doctor: run a training job unchanged, attribute each step's time, give one verdict."""
