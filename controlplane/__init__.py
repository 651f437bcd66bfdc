"""The iamgate control plane: the only writer of MongoDB."""
