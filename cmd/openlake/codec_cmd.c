int ol_cmd_codec(int argc, char **argv);
int
ol_cmd_codec(int argc, char **argv)
{
	return 2;
}
#ifdef OL_CODEC_CMD_MAIN
int
main(int argc, char **argv)
{
	return ol_cmd_codec(argc - 1, argv + 1);
}
#endif
