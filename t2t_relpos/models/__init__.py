"""Registered models built from `t2t_relpos.layers`."""
