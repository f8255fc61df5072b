"""nncodecs' own reading and writing of Zarr v3: every byte it writes to or reads from a
store itself, below the model (``nncodecs.container``).

Documents (:mod:`~nncodecs.store.documents`) and Zarr's objects made from them
(:mod:`~nncodecs.store.zarr_nodes`); chunk keys and shard indexes, built and read in one
module (:mod:`~nncodecs.store.storage`); a tensor's stored objects encoded
(:mod:`~nncodecs.store.encoding`); batched writes behind the caller
(:mod:`~nncodecs.store.batches`); local files and ``pread`` reads
(:mod:`~nncodecs.store.files`); what a user passes as a target opened as a store
(:mod:`~nncodecs.store.opening`); where a writer writes until its commit
(:mod:`~nncodecs.store.output`, :mod:`~nncodecs.store.target`) and a zip written in one
pass (:mod:`~nncodecs.store.zip_writer`, :mod:`~nncodecs.store.zip_output`). Nothing here
knows tensors, layouts, deltas or names: the store never imports the container.
"""
