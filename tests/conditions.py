"""Builders of ABAC condition nodes for tests (the language of ARCHITECTURE.md's ABAC decision)."""


def op(name, left, right=None):
    node = {"op": name, "left": left}
    if right is not None:
        node["right"] = right
    return node


def attr(path):
    return {"attr": path}


def val(value):
    return {"value": value}
