"""Integrations with the libraries people load models with (imported explicitly).

- :func:`nncodecs.integrations.safetensors.safe_open`: a drop-in for
  ``safetensors.safe_open`` over a container;
- :mod:`nncodecs.integrations.torch`: ``save_state_dict`` / ``load_state_dict``
  keeping dtypes and tied tensors.
"""
