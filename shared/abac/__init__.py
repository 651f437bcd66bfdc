"""Attribute-based access control: policies and the condition language they hold.

Pure functions over plain data, shared by the control plane and the decision service.
Nothing here does I/O, reads the clock or logs.

- ``language``: the operators, what each comparison computes, the size of a condition;
- ``evaluator``: a condition compiled into a program of plain tuples, and the one
  evaluator that runs it;
- ``policies``: ``Policy``, and ``CompiledPolicies``, an application's active policies
  indexed so that those covering a permission are one set of programs.

How policies combine with RBAC is ``shared.authorization``.
"""
from shared.abac.evaluator import any_holds, compile_condition, condition_environment, evaluate_condition, holds
from shared.abac.language import MAX_CONDITION_DEPTH, OPERATORS, Malformed, condition_nodes
from shared.abac.policies import ALLOW, DENY, CompiledPolicies, Policy, compile_policies

__all__ = ["ALLOW", "DENY", "MAX_CONDITION_DEPTH", "OPERATORS", "CompiledPolicies", "Malformed", "Policy",
           "any_holds", "compile_condition", "compile_policies", "condition_environment", "condition_nodes",
           "evaluate_condition", "holds"]
