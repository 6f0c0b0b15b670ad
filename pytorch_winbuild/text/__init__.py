"""Safe text: quoting for cmd, PowerShell and sh, secret redaction, terminal-safe output.

Every layer below uses these so untrusted text never reaches a shell, a script or a terminal raw."""
