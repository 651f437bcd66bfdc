"""Code shared by the control plane and the decision service."""
