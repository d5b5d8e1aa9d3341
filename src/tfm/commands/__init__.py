"""Every `tfm` command's body, as library functions that return results and never print
(`tfm.cli` parses the options, calls one of these and prints what it returns).

Modules: engines (`open_translator`: a run or an export opened as one Translator), train
(`tfm train`), decode (`tfm eval`, `tfm translate`), input (the lines
`tfm translate` reads: arguments, a file, or stdin as it arrives), pictures (`tfm attention`,
`tfm positional`, `tfm plot`), runs (`tfm data check`, `tfm average`), prepare
(`tfm data prepare`).
"""
