"""Admission: the answer to a Pod CREATE (webhook mode), the affinity term it adds, the
bindings that make the MutatingAdmissionPolicies do the same (policy mode)."""
