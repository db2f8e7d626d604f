package main

import "fmt"

func init() {
	register(&command{
		name:    "version",
		summary: "print the extension revision this build implements",
		run: func(e *env, args []string) error {
			fs := newFlags(e, "version", "")
			if err := fs.Parse(args); err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, "waisteer: WAI energy-aware steering, WSP1/WSD1/WMH1 version 1")
			return nil
		},
	})
}
