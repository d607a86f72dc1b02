# The terminal of the course's JupyterLab: the learner's own ~/.zshrc first, then the course's
# Python put back in front of PATH (a ~/.zshrc that sets up pyenv or conda moves it back).
ZDOTDIR="$HOME"
if [ -f ~/.zshrc ]; then . ~/.zshrc; fi
if [ -n "$MHA_COURSE_BIN" ]; then PATH="$MHA_COURSE_BIN:$PATH"; export PATH; fi
