# zsh reads this instead of ~/.zshenv while ZDOTDIR points here: read the learner's own.
if [ -f ~/.zshenv ]; then . ~/.zshenv; fi
