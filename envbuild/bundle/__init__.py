"""Offline bundles: everything one recipe's lock names for one target, in one tar file.

``envbuild bundle`` packs it (``envbuild.bundle.pack``) on a machine with network;
``envbuild provision --bundle FILE`` provisions from it with no network
(``envbuild.bundle.offline``): the bundle is verified whole against its manifest
(``envbuild.bundle.manifest``) before anything is installed, then each node receives its
``node/`` folder and installs from it alone.
"""
