"""Decoding. `search` (greedy, sampling, beam search) is written in keras.ops and runs on every Keras backend;
`translator`, `export` (SavedModel) and the decoder's helpers need TensorFlow; `ctranslate2_export` needs the
ctranslate2 package.
"""
