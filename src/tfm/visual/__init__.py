"""Pictures that make the Transformer visible: attention weights per head (`attention_map`,
drawing what `tfm.prediction.attention_weights` collects), the sinusoidal positional encoding
(`positional`) and training curves (`curves`). This package only draws; finding runs and reading
their files is `tfm.commands`'s. matplotlib is imported only inside the drawing functions (see
`figure`)."""
