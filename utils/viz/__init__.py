"""Static plots for the lessons, one module per lesson topic (`utils.viz.patches` for lesson 1, ...).

Nothing in the library imports these; notebooks and widgets do.
"""
