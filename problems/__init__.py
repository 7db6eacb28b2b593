"""Problems: where examples come from and how they are encoded (`t2t_relpos.problems`)."""
