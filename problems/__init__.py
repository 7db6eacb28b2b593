"""Problems: where examples come from and how they are encoded (`t2t_relpos.problems`)."""

# Imported for their registrations: `registry.problem("algorithmic_reverse_decimal40")` works once the
# package is imported. None of these imports TensorFlow (listing problems stays quick).
from t2t_relpos.problems import (  # pylint: disable=unused-import
    agreement,
    algorithmic,
    babi,
    lambada,
    languagemodel_local,
    languagemodel_shakespeare,
    learning_to_execute,
    translate_local,
    translate_wmt,
)
