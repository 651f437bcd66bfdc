"""Builders of ABAC condition nodes for tests (the language of docs/authorization.md, "Conditions and their
validation")."""


def op(name, left, right=None):
    node = {"op": name, "left": left}
    if right is not None:
        node["right"] = right
    return node


def attr(path):
    return {"attr": path}


def val(value):
    return {"value": value}
