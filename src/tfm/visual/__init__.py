"""Pictures that make the Transformer visible: attention weights per head (`attention`,
`attention_plot`), the sinusoidal positional encoding (`positional`) and training curves
(`curves`). matplotlib is imported only inside the drawing functions (see `figure`)."""
