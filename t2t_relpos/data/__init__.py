"""TensorFlow only: tf.data pipelines, tokenizers in the graph, shards and vocabularies.

The layers, models and search (`t2t_relpos.layers`, `.models`, `.decoding.search`) run on every Keras backend;
this package needs TensorFlow.
"""
