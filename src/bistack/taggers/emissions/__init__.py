"""What a tagger's emissions mean, computed once for every outlet: tags, token and entity
confidences (on the host over numpy, or on the device by the CRF's scan), one type per document
for the same words, and the confidences' temperature."""
