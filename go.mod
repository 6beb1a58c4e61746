module talkbox

go 1.26.8

require (
	fyne.io/fyne/v2 v2.7.1 // indirect
	github.com/daulet/tokenizers v1.22.1 // indirect
	github.com/gen2brain/malgo v0.11.24 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
