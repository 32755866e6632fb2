"""Text hangwatch did not write (log lines, command lines, file names, stacks) on its way to an
output: one module per format, each redacting secrets (`redact`) and then escaping what the
format would otherwise obey.

    terminal  control characters shown as `\\x1b`, never sent; never read as rich markup
    markdown  code spans and fences the text cannot close, table cells, inline text
    xml       characters XML 1.0 cannot hold, shown escaped
    jsontext  valid UTF-8 JSON whatever the bytes (lone surrogates, C1 controls)
    github    workflow command data and properties

Every reporter takes hostile text through these and nowhere else.
"""
