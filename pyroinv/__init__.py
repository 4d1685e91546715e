"""pyroinv: learning invariant weights in neural networks with Pyro."""
__version__ = "0.1.0"
