"""Pictures drawn on the server: explanation maps and weights as images (``render``, numpy and PIL), charts
(``figures``, matplotlib), and slides and GIFs for a talk (``slides``)."""
