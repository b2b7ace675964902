// placeholder: filled in by the walking skeleton
