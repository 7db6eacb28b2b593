"""TensorFlow only: the trainer (tf.distribute), optimizer and schedule, losses, checkpoints and averaging.

The layers, models and search (`t2t_relpos.layers`, `.models`, `.decoding.search`) run on every Keras backend;
this package needs TensorFlow.
"""
