"""Actions: the primitives (``model``) every plan step becomes (``steps``), and the files of
envbuild's own that actions copy to nodes (``assets``)."""
